// Copyright 2026 The pleg_exporter Authors
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
// http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.

package e2e

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/internal/manifests"
	"github.com/pleg-exporter/pleg_exporter/internal/stack"
	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
)

// podContainer is the running container of a kubelet pod, by pod and
// container name.
func podContainer(ctx context.Context, rs runtimeapi.RuntimeServiceClient, pod, name string) (*runtimeapi.Container, error) {
	resp, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{"io.kubernetes.pod.name": pod, "io.kubernetes.container.name": name},
	}})
	if err != nil {
		return nil, err
	}
	if n := len(resp.GetContainers()); n != 1 {
		return nil, fmt.Errorf("%d running %s containers in pod %s", n, name, pod)
	}
	return resp.GetContainers()[0], nil
}

// probes counts the kubelet's probe results for a pod's container:
// prober_probe_total by probe_type and result.
func probes(ms map[string]*dto.MetricFamily, pod, container string) map[string]float64 {
	out := map[string]float64{}
	mf, ok := ms["prober_probe_total"]
	if !ok {
		return out
	}
	for _, m := range mf.GetMetric() {
		l := map[string]string{}
		for _, lp := range m.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		if l["pod"] == pod && l["container"] == container {
			out[l["probe_type"]+"/"+l["result"]] += m.GetCounter().GetValue()
		}
	}
	return out
}

// The exporter as a pod: the containerd overlay's DaemonSet, its pod
// template run by the kubelet as a static pod from the project's image. It
// answers on the pod's address with the runtime's counts, passes the
// kubelet's probes, and goes on relisting across a containerd restart (the
// socket re-created) without a restart of its own.
func exporterPod(t *testing.T, ctx context.Context, st *stack.Stack, rs runtimeapi.RuntimeServiceClient) {
	ds, err := manifests.DaemonSet(filepath.Join(repo, "deploy", "kubernetes", "overlays", "containerd"))
	if err != nil {
		t.Fatal(err)
	}
	c := ds.Spec.Template.Spec.Containers[0]
	t0 := time.Now()
	how, err := testenv.ProjectImage(ctx, st.Dockerd, repo, c.Image, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := testenv.CopyImage(ctx, st.Dockerd, st.Containerd, c.Image); err != nil {
		t.Fatal(err)
	}
	t.Logf("exporter as a pod: image %s (%s) loaded into the private containerd in %s", c.Image, how, time.Since(t0).Round(100*time.Millisecond))
	// The node's /run/containerd is the private containerd's directory here.
	pod, err := manifests.StaticPod(ds, map[string]string{"/run/containerd": st.Containerd.Dir})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.HostNetwork {
		t.Fatal("the DaemonSet runs on the host network; this step checks the pod-network address")
	}
	if err := st.Kubelet.WriteStaticPod(pod); err != nil {
		t.Fatal(err)
	}
	defer func() {
		// The later steps run without it; it stops within its grace period.
		st.Kubelet.RemoveStaticPod(pod.Name)
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
			if _, err := podContainer(ctx, rs, podName(pod.Name), c.Name); err != nil {
				return
			}
		}
		t.Errorf("the exporter pod still runs a minute after its manifest was removed")
	}()

	name := podName(pod.Name)
	written := time.Now()
	var ctr *runtimeapi.Container
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		if ctr, err = podContainer(ctx, rs, name, c.Name); err == nil {
			break
		}
		if l, ok := st.Kubelet.FindLog(written, "Could not process manifest file", pod.Name+".yaml"); ok {
			t.Fatalf("the kubelet refuses the DaemonSet's pod template: %s", l.Text)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kubelet did not run the exporter pod within 2m: %v\n%s", err, st.Kubelet.LogTail(30))
		}
	}
	sb, err := rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: ctr.GetPodSandboxId()})
	if err != nil {
		t.Fatal(err)
	}
	ip := sb.GetStatus().GetNetwork().GetIp()
	if ip == "" {
		t.Fatal("the exporter pod has no pod IP")
	}
	url := "http://" + net.JoinHostPort(ip, fmt.Sprint(c.Ports[0].ContainerPort)) + "/metrics"

	// /metrics on the pod's address: up, and the runtime's counts.
	var last []string
	for deadline := time.Now().Add(4 * relistInterval); ; time.Sleep(time.Second) {
		var ms map[string]*dto.MetricFamily
		v, err := stableView(ctx, rs, func() (err error) {
			ms, err = testenv.ScrapeMetrics(url)
			return err
		})
		if err == nil {
			last = exporterDiff(ms, v)
			if up, _ := testenv.Gauge(ms, "pleg_runtime_up", nil); up != 1 {
				last = append(last, fmt.Sprintf("pleg_runtime_up %v", up))
			}
			if len(last) == 0 {
				t.Logf("exporter as a pod: %s answers pleg_runtime_up 1 with the runtime's %d containers and %d answer bytes", url, v.total, int(v.containerBytes))
				break
			}
		} else {
			last = []string{err.Error()}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pod's /metrics at %s never matched the runtime:\n%s\n%s", url, strings.Join(last, "\n"), st.Kubelet.LogTail(20))
		}
	}

	// The probes, as the kubelet runs them (liveness every 20 s).
	var got map[string]float64
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(time.Second) {
		ms, err := st.Kubelet.ProbeMetrics()
		if err != nil {
			t.Fatal(err)
		}
		got = probes(ms, name, c.Name)
		if got["Liveness/successful"] >= 1 && got["Readiness/successful"] >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kubelet's probes of the exporter pod: %v, want a successful liveness and readiness probe", got)
		}
	}
	// Not ready until its first relist is done (503) is what readiness is
	// for; a failed liveness probe would restart it.
	if got["Liveness/failed"] > 0 {
		t.Errorf("the kubelet's probes of the exporter pod: %v", got)
	}
	t.Logf("exporter as a pod: the kubelet's probes %v", got)

	// containerd restarts, its socket re-created.
	var before syscall.Stat_t
	syscall.Stat(st.Containerd.Socket, &before)
	st.Containerd.Terminate()
	if err := st.Containerd.Restart(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	var after syscall.Stat_t
	syscall.Stat(st.Containerd.Socket, &after)
	// A new socket file: the inode number may be reused, its change time not.
	if after.Ino == before.Ino && after.Ctim == before.Ctim {
		t.Fatal("containerd's socket is the same file after the restart: nothing tested")
	}
	for {
		ms, err := testenv.ScrapeMetrics(url)
		if err == nil {
			up, _ := testenv.Gauge(ms, "pleg_runtime_up", nil)
			age, _ := testenv.Gauge(ms, "pleg_last_seen_seconds", nil)
			if up == 1 && age < time.Since(back).Seconds() {
				t.Logf("exporter as a pod: relisting again %s after containerd came back (its socket re-created; interval %s)", time.Since(back).Round(100*time.Millisecond), relistInterval)
				break
			}
		}
		if time.Since(back) > 2*relistInterval {
			t.Fatalf("the exporter pod did not relist within 2 intervals (%s) of containerd's restart: %v", 2*relistInterval, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// No restart: the same container, attempt 0, its liveness probes pass.
	time.Sleep(25 * time.Second)
	now, err := podContainer(ctx, rs, name, c.Name)
	if err != nil {
		t.Fatal(err)
	}
	if now.GetId() != ctr.GetId() || now.GetMetadata().GetAttempt() != 0 {
		t.Errorf("the exporter container was restarted: %s attempt %d, was %s", now.GetId(), now.GetMetadata().GetAttempt(), ctr.GetId())
	}
	ms, err := st.Kubelet.ProbeMetrics()
	if err != nil {
		t.Fatal(err)
	}
	if p := probes(ms, name, c.Name); p["Liveness/failed"] > 0 || p["Readiness/failed"] > got["Readiness/failed"] || p["Liveness/successful"] <= got["Liveness/successful"] {
		t.Errorf("probes across the restart: %v, before %v", p, got)
	} else {
		t.Logf("exporter as a pod: the same container after containerd's restart, attempt 0; the kubelet's probes %v", p)
	}
}

// podName is the name the kubelet gives a static pod.
func podName(manifest string) string { return manifest + "-" + testenv.KubeletNode }
