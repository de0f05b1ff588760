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

package integration

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/pleg-exporter/pleg_exporter/internal/manifests"
	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
)

// renderDaemonSet renders a kustomize overlay and returns its DaemonSet,
// strictly decoded.
func renderDaemonSet(t *testing.T, overlay string) *appsv1.DaemonSet {
	t.Helper()
	ds, err := manifests.DaemonSet(filepath.Join("../../deploy/kubernetes", overlay))
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// podContainer turns the DaemonSet's pod template into a container on the
// private dockerd, changing only what a pod network would give: the pod runs
// on the host network with POD_IP=127.0.0.1, and listens on port instead of
// 10391. hostDirs maps each hostPath to the private directory that stands for
// it. fileMount replaces the directory mount with a mount of the socket file
// inside it (the DaemonSet before the fix).
func podContainer(t *testing.T, ds *appsv1.DaemonSet, name string, port int, hostDirs map[string]string, fileMount string) (*container.Config, *container.HostConfig) {
	t.Helper()
	spec := ds.Spec.Template.Spec
	c := spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP":
			env[e.Name] = "127.0.0.1"
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		default:
			t.Fatalf("env %s: %+v is not supported by this test", e.Name, e.ValueFrom)
		}
	}
	var args, envList []string
	for k, v := range env {
		envList = append(envList, k+"="+v)
	}
	for _, a := range c.Args {
		// The kubelet's $(VAR) expansion.
		for k, v := range env {
			a = strings.ReplaceAll(a, "$("+k+")", v)
		}
		if strings.HasPrefix(a, "--web.listen-address=") {
			a = strings.Replace(a, ":10391", fmt.Sprintf(":%d", port), 1)
		}
		args = append(args, a)
	}
	psc, sc := spec.SecurityContext, c.SecurityContext
	hc := &container.HostConfig{
		NetworkMode:    "host",
		ReadonlyRootfs: ptr.Deref(sc.ReadOnlyRootFilesystem, false),
	}
	for _, d := range sc.Capabilities.Drop {
		hc.CapDrop = append(hc.CapDrop, string(d))
	}
	if !ptr.Deref(sc.AllowPrivilegeEscalation, true) {
		hc.SecurityOpt = append(hc.SecurityOpt, "no-new-privileges")
	}
	if len(sc.Capabilities.Add) > 0 || ptr.Deref(sc.Privileged, false) {
		t.Fatalf("securityContext %+v: this test runs no privileged pod", sc)
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	for _, vm := range c.VolumeMounts {
		v, ok := volumes[vm.Name]
		if !ok || v.HostPath == nil {
			t.Fatalf("volume %s is not a hostPath", vm.Name)
		}
		src, ok := hostDirs[v.HostPath.Path]
		if !ok {
			t.Fatalf("no private directory stands for hostPath %s", v.HostPath.Path)
		}
		m := mount.Mount{Type: mount.TypeBind, Source: src, Target: vm.MountPath, ReadOnly: vm.ReadOnly,
			BindOptions: &mount.BindOptions{Propagation: propagation(t, vm.MountPropagation)}}
		if fileMount != "" {
			m.Source, m.Target = filepath.Join(src, fileMount), filepath.Join(vm.MountPath, fileMount)
			m.BindOptions = nil
		}
		hc.Mounts = append(hc.Mounts, m)
	}
	cfg := &container.Config{
		Image:  projectImageRef,
		Cmd:    args,
		Env:    envList,
		User:   fmt.Sprintf("%d:%d", ptr.Deref(psc.RunAsUser, 65534), ptr.Deref(psc.RunAsGroup, 65534)),
		Labels: map[string]string{"pleg-test": name},
	}
	return cfg, hc
}

// propagation is what the kubelet asks of the runtime for a mount's
// propagation mode.
func propagation(t *testing.T, p *corev1.MountPropagationMode) mount.Propagation {
	switch ptr.Deref(p, corev1.MountPropagationNone) {
	case corev1.MountPropagationNone:
		return mount.PropagationRPrivate
	default:
		t.Fatalf("mount propagation %s: the exporter needs no Bidirectional mount", *p)
		return ""
	}
}

// mountsUnder lists the mount points at or below dir in a process's mount
// namespace.
func mountsUnder(t *testing.T, pid int, dir string) []string {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	return out
}

type podUnderTest struct {
	id, addr string
	started  string
	pid      int
}

func (p *podUnderTest) get(path string) (int, string, error) {
	cl := &http.Client{Timeout: 5 * time.Second}
	r, err := cl.Get("http://" + p.addr + path)
	if err != nil {
		return 0, "", err
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	return r.StatusCode, string(b), err
}

// waitMetric polls /metrics until it contains line, and returns when.
func (p *podUnderTest) waitMetric(t *testing.T, line string, within time.Duration) (time.Time, bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if _, body, err := p.get("/metrics"); err == nil && strings.Contains(body, "\n"+line+"\n") {
			return time.Now(), true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Time{}, false
}

func (p *podUnderTest) logs(t *testing.T) string {
	return containerLogs(context.Background(), p.id)
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// The DaemonSet's pod survives a runtime restart: the project's image, run on
// the private dockerd with the containerd overlay's args, env,
// securityContext and mounts, against the private containerd. containerd is
// stopped and started again (its socket re-created); the pod relists again
// within two intervals, with no container restart. Next to it runs the same
// pod with the socket *file* mounted, as the DaemonSet did before: it stays
// blind, and its /-/healthy fails so the kubelet would recreate it.
func TestDaemonSetPodSurvivesRuntimeRestart(t *testing.T) {
	need(t, ctdErr)
	need(t, dockErr)
	c := ctx(t, 5*time.Minute)
	projectImage(t)
	ds := renderDaemonSet(t, "overlays/containerd")
	const interval = 10 * time.Second // the DaemonSet's, the flag's default
	for _, a := range ds.Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--relist.interval") {
			t.Fatalf("the DaemonSet sets %s; this test assumes the default %s", a, interval)
		}
	}
	// The overlay mounts /run/containerd and relists through
	// /host/run/containerd/containerd.sock: the private containerd's
	// directory stands for /run/containerd.
	if filepath.Base(ctd.Socket) != "containerd.sock" {
		t.Fatalf("private socket %s is not named like containerd's", ctd.Socket)
	}
	hostDirs := map[string]string{"/run/containerd": filepath.Dir(ctd.Socket)}

	start := func(name, fileMount string) *podUnderTest {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		cfg, hc := podContainer(t, ds, name, port, hostDirs, fileMount)
		cr, err := dockerd.API.ContainerCreate(c, cfg, hc, nil, nil, "pleg-exporter-"+name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			dockerd.API.ContainerRemove(context.Background(), cr.ID, container.RemoveOptions{Force: true})
		})
		if err := dockerd.API.ContainerStart(c, cr.ID, container.StartOptions{}); err != nil {
			t.Fatal(err)
		}
		p := &podUnderTest{id: cr.ID, addr: fmt.Sprintf("127.0.0.1:%d", port)}
		if _, ok := p.waitMetric(t, "pleg_runtime_up 1", time.Minute); !ok {
			t.Fatalf("%s never relisted the private containerd; logs:\n%s", name, p.logs(t))
		}
		info, err := dockerd.API.ContainerInspect(c, cr.ID)
		if err != nil {
			t.Fatal(err)
		}
		p.started, p.pid = info.State.StartedAt, info.State.Pid
		return p
	}
	// A pod running before the exporter starts: its root filesystem is
	// mounted below the runtime's directory.
	pod, err := kubelet.RunPod(c, "daemonset-test", "before-the-exporter")
	if err != nil {
		t.Fatal(err)
	}
	cid, err := kubelet.CreateContainer(c, pod, testenv.ContainerSpec{Name: "sleeper", Start: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := start("dir-mount", "")
	file := start("file-mount", "containerd.sock")

	// The pod goes away; the runtime unmounts its root filesystem and
	// removes the directory. The exporter's mount namespace, which got a
	// copy of the mount at its start, must not keep it (a leaked mount holds
	// the disk space and, on old kernels, makes removals fail as busy); since
	// Linux 3.18 removing the directory releases it in every namespace.
	in := func() []string {
		var ids []string
		for _, m := range mountsUnder(t, dir.pid, "/host/run/containerd") {
			if strings.Contains(m, cid) || strings.Contains(m, pod.ID) {
				ids = append(ids, m)
			}
		}
		return ids
	}
	if len(in()) == 0 {
		t.Fatalf("the running pod's mounts are not visible in the exporter's mount namespace:\n%s",
			strings.Join(mountsUnder(t, dir.pid, "/host/run/containerd"), "\n"))
	}
	if err := kubelet.StopPod(c, pod); err != nil {
		t.Fatal(err)
	}
	if _, err := kubelet.RS.RemovePodSandbox(c, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: pod.ID}); err != nil {
		t.Fatal(err)
	}
	if leaked := in(); len(leaked) > 0 {
		t.Errorf("the removed pod's mounts are still held in the exporter's mount namespace: %v", leaked)
	} else {
		t.Log("mounts of a pod removed while the exporter ran: released in its mount namespace too")
	}

	// systemctl restart containerd: stopped, then started again with its
	// socket deleted and made anew.
	before := inode(t, ctd.Socket)
	ctd.Terminate()
	for _, p := range []*podUnderTest{dir, file} {
		if _, ok := p.waitMetric(t, "pleg_runtime_up 0", 3*interval); !ok {
			t.Fatalf("%s: pleg_runtime_up never went to 0 with containerd stopped", p.addr)
		}
	}
	if err := ctd.Restart(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	if after := inode(t, ctd.Socket); after == before {
		t.Fatalf("containerd kept its socket (inode %d): the test does not restart it the way a runtime upgrade does", before)
	}

	at, ok := dir.waitMetric(t, "pleg_runtime_up 1", 2*interval)
	if !ok {
		t.Fatalf("directory mount: no relist within 2 intervals (%s) of containerd's restart; logs:\n%s", 2*interval, dir.logs(t))
	}
	t.Logf("directory mount: relisting again %s after containerd was back (interval %s)", at.Sub(back).Round(100*time.Millisecond), interval)
	if code, body, err := dir.get("/-/healthy"); err != nil || code != http.StatusOK {
		t.Errorf("directory mount: /-/healthy %d %q %v", code, body, err)
	}
	info, err := dockerd.API.ContainerInspect(c, dir.id)
	if err != nil {
		t.Fatal(err)
	}
	if !info.State.Running || info.State.StartedAt != dir.started || info.State.Pid != dir.pid || info.RestartCount != 0 {
		t.Errorf("directory mount: the container was restarted (started %s, was %s; pid %d, was %d; restarts %d)",
			info.State.StartedAt, dir.started, info.State.Pid, dir.pid, info.RestartCount)
	}

	// The file mount: blind for good, and it says so on /-/healthy.
	if _, ok := file.waitMetric(t, "pleg_runtime_up 1", 2*interval); ok {
		t.Fatal("file mount relisted after the restart: the test no longer reproduces the stale socket")
	}
	code, body, err := file.get("/-/healthy")
	if err != nil || code != http.StatusServiceUnavailable || !strings.Contains(body, "stale") {
		t.Fatalf("file mount: /-/healthy %d %q %v, want 503 naming the stale socket", code, body, err)
	}
	t.Logf("file mount: still blind after %s; /-/healthy: %d %s", 2*interval, code, strings.TrimSpace(body))
}
