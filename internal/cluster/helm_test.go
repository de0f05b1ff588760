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

package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/internal/stack"
	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
)

const repo = "../.."

func TestMain(m *testing.M) {
	if os.Getenv("PLEG_TEST_KILLED_RUN") == "" {
		testenv.CleanLeftoversOrExit()
	}
	os.Exit(m.Run())
}

// startCluster starts the cluster for a test (skipping outside CI when a
// part is missing) and loads the project's image into its containerd.
func startCluster(t *testing.T, ctx context.Context) *Cluster {
	t.Helper()
	err := testenv.Check("containerd", "runc", "busybox", "ip", "docker")
	if err == nil {
		kubelet, err = kubeletUnderTest()
	}
	var c *Cluster
	if err == nil {
		c, err = Start(ctx, Options{Dir: filepath.Join(t.TempDir(), "cluster"), Log: testLog{t},
			FeatureGates: kubelet.gates, Runtime: kubelet.runtime})
	}
	if err != nil {
		if os.Getenv("CI") != "" || !errors.Is(err, testenv.ErrUnavailable) {
			t.Fatal(err)
		}
		t.Skipf("skipping: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("cluster stop: %v", err)
		}
	})
	d, err := testenv.StartDockerd(filepath.Join(c.Dir, "docker"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	t0 := time.Now()
	how, err := testenv.ProjectImage(ctx, d, repo, image, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := testenv.CopyImage(ctx, d, c.Containerd, image); err != nil {
		t.Fatal(err)
	}
	t.Logf("image %s (%s) in the cluster's containerd in %v", image, how, since(t0))
	kubelet.checkGates(t, c)
	t.Logf("the node: %s", kubelet)
	return c
}

type testLog struct{ t *testing.T }

func (l testLog) Write(b []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// The chart's default image: the repository and the chart's appVersion.
const image = "pleg-exporter:0.1.0"

// The namespace and release the runbooks name.
const (
	namespace = "pleg-exporter"
	release   = "pleg-exporter"
	chart     = repo + "/deploy/helm/pleg-exporter"
)

// helmValues points the chart's containerd profile at the cluster's
// containerd, through the chart's values only, with the PLEG threshold of
// the kubelet under test.
func helmValues(c *Cluster, extra ...string) []string {
	v := []string{"--set", "runtime.profile=containerd", "--set", "runtime.socket=" + c.Containerd.Socket}
	if kubelet.eventedGate() {
		// The runbook's setting for a node pool of such kubelets
		// (PLEGThresholdMismatch): their threshold is 10m.
		v = append(v, "--set", "plegThreshold=10m")
	}
	return append(v, extra...)
}

// The chart as a user installs it, in a cluster, and the overflow there:
//   - helm install: the DaemonSet controller makes the pod, the scheduler
//     binds it to the node, the kubelet runs it with the chart's
//     ServiceAccount; kubectl rollout status succeeds; the pod answers on
//     its address with the runtime's counts and passes the kubelet's probes,
//     across a containerd restart, in the same container;
//   - helm upgrade with a changed value rolls the pod;
//   - the freeze (containerd stopped) and the overflow past 16 MiB turn the
//     Node NotReady, the first page reaching the webhook 90 s and 120 s
//     before the API server records it (notready_test.go); SIGCONT, and the
//     runbook's kubectl exec … pleg_exporter gc, make it Ready again and
//     every alert resolves;
//   - helm uninstall leaves nothing behind.
//
// One cluster and one release for all of it: each step starts where the
// one before left the node, as an SRE's day does.
func TestCluster(t *testing.T) {
	// A kubelet that relists in the evented mode waits 10 minutes for its
	// threshold (make test-kubelets).
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	c := startCluster(t, ctx)
	pages, hook := startPager(t, c)
	m, err := c.StartMonitoring(ctx, MonitoringOptions{ReceiverURL: hook})
	if err != nil {
		t.Fatal(err)
	}
	first := install(t, ctx, c, "--set", "podMonitor.enabled=true", "--set", "prometheusRule.enabled=true")
	if first.Spec.ServiceAccountName != release {
		t.Errorf("the pod runs as service account %q, want the chart's %q", first.Spec.ServiceAccountName, release)
	}
	if first.Spec.NodeName != Node {
		t.Errorf("the pod is bound to %q, want %q", first.Spec.NodeName, Node)
	}
	url := podURL(first)
	agree(t, ctx, c, url)
	scraped(t, m, first.Name)
	probed := probesPass(t, c, first)
	survivesRestart(t, ctx, c, first, url, probed)
	kubelet.backToEvented(t, ctx, c, "containerd's restart")

	// An upgrade with a changed value rolls the pod.
	t1 := time.Now()
	if _, err := c.Helm(ctx, append([]string{"upgrade", release, chart, "--namespace", namespace},
		helmValues(c, "--set", "podMonitor.enabled=true", "--set", "prometheusRule.enabled=true",
			"--set", "extraArgs={--collector.namespaces}")...)...); err != nil {
		t.Fatal(err)
	}
	second := rollout(t, ctx, c, t1)
	if second.UID == first.UID {
		t.Errorf("helm upgrade with a changed value left pod %s in place", first.Name)
	}
	if args := strings.Join(second.Spec.Containers[0].Args, " "); !strings.Contains(args, "--collector.namespaces") {
		t.Errorf("the rolled pod's args %q lack the upgrade's value", args)
	}

	// The freeze first; the overflow, healed by gc, ends with every alert
	// of both resolved. make test-kubelets records them.
	faults := time.Now()
	*recording = stack.Recording{Start: faults, Hold: kubelet.record != ""}
	recording.Check("at rest after helm upgrade: no page", faults)
	if !t.Run("freeze", func(t *testing.T) { frozen(t, ctx, c, second, pages) }) {
		return
	}
	kubelet.backToEvented(t, ctx, c, "the freeze")
	if !t.Run("overflow", func(t *testing.T) { overflow(t, ctx, c, second, pages, faults) }) {
		return
	}
	recording.Check("healed by gc: every alert resolved", time.Now())
	kubelet.writeRecording(t, ctx, c, recording)
	// After both faults every panel has something to show.
	t.Run("dashboards", func(t *testing.T) { dashboards(t, ctx, c) })

	t2 := time.Now()
	if _, err := c.Helm(ctx, "uninstall", release, "--namespace", namespace, "--wait"); err != nil {
		t.Fatal(err)
	}
	// --wait returns once the objects are deleted; the pod takes its grace
	// period to go.
	waitPodGone(t, ctx, c, second.Name)
	left, err := c.Kubectl(ctx, "get", "all,serviceaccounts,configmaps,secrets,roles,rolebindings,podmonitors,servicemonitors,prometheusrules",
		"--all-namespaces", "-l", "app.kubernetes.io/instance="+release, "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.TrimSpace(string(left)); s != "" {
		t.Errorf("helm uninstall left:\n%s", s)
	}
	t.Logf("helm uninstall: nothing of the release left in %v", since(t2))
}

// podURL is the exporter's /metrics on the pod's address.
func podURL(p corev1.Pod) string {
	return "http://" + net.JoinHostPort(p.Status.PodIP, "10391") + "/metrics"
}

// install is helm install of the chart into the cluster, and its rollout.
func install(t *testing.T, ctx context.Context, c *Cluster, values ...string) corev1.Pod {
	t.Helper()
	t0 := time.Now()
	if _, err := c.Helm(ctx, append([]string{"install", release, chart, "--namespace", namespace, "--create-namespace"},
		helmValues(c, values...)...)...); err != nil {
		t.Fatal(err)
	}
	return rollout(t, ctx, c, t0)
}

// rollout waits for kubectl rollout status of the DaemonSet and returns its
// one pod, Ready.
func rollout(t *testing.T, ctx context.Context, c *Cluster, start time.Time) corev1.Pod {
	t.Helper()
	if out, err := c.Kubectl(ctx, "rollout", "status", "daemonset/"+release, "--namespace", namespace, "--timeout=3m"); err != nil {
		t.Fatalf("%v\n%s\n%s", err, out, c.Kubelet.LogTail(30))
	}
	var ds appsv1.DaemonSet
	if err := c.Get(ctx, &ds, "daemonset", release, "--namespace", namespace); err != nil {
		t.Fatal(err)
	}
	var pods corev1.PodList
	if err := c.Get(ctx, &pods, "pods", "--namespace", namespace, "-l", "app.kubernetes.io/instance="+release); err != nil {
		t.Fatal(err)
	}
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	if len(live) != 1 {
		t.Fatalf("%d live pods of the DaemonSet, want 1", len(live))
	}
	p := live[0]
	t.Logf("rollout of %s: pod %s Ready on %s at %s in %v (DaemonSet %d/%d ready)", release, p.Name, p.Spec.NodeName,
		p.Status.PodIP, since(start), ds.Status.NumberReady, ds.Status.DesiredNumberScheduled)
	return p
}

func waitPodGone(t *testing.T, ctx context.Context, c *Cluster, name string) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
		out, err := c.Kubectl(ctx, "get", "pod", name, "--namespace", namespace, "--ignore-not-found", "-o", "name")
		if err == nil && strings.TrimSpace(string(out)) == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(fmt.Errorf("pod %s still there 2m after helm uninstall (%v)", name, err))
		}
	}
}

// agree waits until the pod's /metrics says the runtime is up and counts
// its containers by state as the runtime lists them (the same list before
// and after the scrape).
func agree(t *testing.T, ctx context.Context, c *Cluster, url string) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		before, err := runtimeCounts(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		ms, err := testenv.ScrapeMetrics(url)
		after, _ := runtimeCounts(ctx, c)
		if err == nil && fmt.Sprint(before) == fmt.Sprint(after) {
			got := map[string]int{}
			for state := range before {
				v, _ := testenv.Gauge(ms, "pleg_containers", map[string]string{"state": state})
				got[state] = int(v)
			}
			up, _ := testenv.Gauge(ms, "pleg_runtime_up", nil)
			if up == 1 && fmt.Sprint(got) == fmt.Sprint(before) {
				t.Logf("the pod's %s: pleg_runtime_up 1, containers %v as the runtime lists them", url, got)
				return
			}
			last = fmt.Sprintf("pleg_runtime_up %v, pleg_containers %v, the runtime %v", up, got, before)
		} else {
			last = fmt.Sprint(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pod's %s never agreed with the runtime: %s", url, last)
		}
	}
}

// runtimeCounts is the runtime's containers by state, as pleg_containers
// names them.
func runtimeCounts(ctx context.Context, c *Cluster) (map[string]int, error) {
	cc, err := c.Containerd.Dial(64 << 20)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	resp, err := runtimeapi.NewRuntimeServiceClient(cc).ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return nil, err
	}
	out := map[string]int{"created": 0, "running": 0, "exited": 0, "unknown": 0}
	for _, ctr := range resp.GetContainers() {
		out[strings.TrimPrefix(strings.ToLower(ctr.GetState().String()), "container_")]++
	}
	return out, nil
}

// probesPass waits for the kubelet's first successful liveness and
// readiness probes of the pod (liveness every 20 s) and returns the counts.
func probesPass(t *testing.T, c *Cluster, pod corev1.Pod) map[string]float64 {
	t.Helper()
	name := pod.Spec.Containers[0].Name
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(time.Second) {
		ms, err := c.Kubelet.ProbeMetrics()
		if err != nil {
			t.Fatal(err)
		}
		got := probes(ms, pod.Name, name)
		if got["Liveness/successful"] >= 1 && got["Readiness/successful"] >= 1 {
			// Not ready until its first relist is done is what readiness is
			// for; a failed liveness probe would restart it.
			if got["Liveness/failed"] > 0 {
				t.Errorf("the kubelet's probes of the exporter pod: %v", got)
			}
			t.Logf("the kubelet's probes of %s: %v", pod.Name, got)
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kubelet's probes of %s: %v, want a successful liveness and readiness probe", pod.Name, got)
		}
	}
}

// probes counts the kubelet's probe results for a pod's container:
// prober_probe_total by probe_type and result.
func probes(ms map[string]*dto.MetricFamily, pod, container string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range ms["prober_probe_total"].GetMetric() {
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

// survivesRestart restarts containerd (its socket re-created, as systemctl
// restart does): the pod relists again within two intervals, in the same
// container, and its probes go on passing.
func survivesRestart(t *testing.T, ctx context.Context, c *Cluster, pod corev1.Pod, url string, probed map[string]float64) {
	t.Helper()
	before := pod.Status.ContainerStatuses[0]
	c.Containerd.Terminate()
	if err := c.Containerd.Restart(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	const interval = 10 * time.Second // the exporter's default --relist.interval
	for {
		ms, err := testenv.ScrapeMetrics(url)
		if err == nil {
			up, _ := testenv.Gauge(ms, "pleg_runtime_up", nil)
			age, _ := testenv.Gauge(ms, "pleg_last_seen_seconds", nil)
			if up == 1 && age < time.Since(back).Seconds() {
				t.Logf("relisting again %v after containerd came back", since(back))
				break
			}
		}
		if time.Since(back) > 2*interval {
			t.Fatalf("the pod did not relist within 2 intervals of containerd's restart: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(25 * time.Second) // one liveness probe more
	var now corev1.Pod
	if err := c.Get(ctx, &now, "pod", pod.Name, "--namespace", namespace); err != nil {
		t.Fatal(err)
	}
	after := now.Status.ContainerStatuses[0]
	if after.ContainerID != before.ContainerID || after.RestartCount != 0 {
		t.Errorf("the exporter container was restarted: %s restarts %d, was %s", after.ContainerID, after.RestartCount, before.ContainerID)
	}
	ms, err := c.Kubelet.ProbeMetrics()
	if err != nil {
		t.Fatal(err)
	}
	if p := probes(ms, pod.Name, pod.Spec.Containers[0].Name); p["Liveness/failed"] > 0 || p["Readiness/failed"] > probed["Readiness/failed"] ||
		p["Liveness/successful"] <= probed["Liveness/successful"] {
		t.Errorf("probes across containerd's restart: %v, before %v", p, probed)
	}
}
