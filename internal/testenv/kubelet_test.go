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

package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestMain(m *testing.M) {
	if os.Getenv(envFakeKubelet) != "" {
		fakeKubelet()
		return
	}
	if os.Getenv("PLEG_TEST_KILLED_RUN") == "" {
		CleanLeftoversOrExit()
	}
	os.Exit(m.Run())
}

func requireKubelet(t *testing.T) string {
	t.Helper()
	bin, err := KubeletBinary()
	if err == nil {
		err = Check("containerd", "runc", "ctr", "busybox", "ip")
	}
	if err != nil {
		if os.Getenv("CI") != "" || !errors.Is(err, ErrUnavailable) {
			t.Fatal(err)
		}
		t.Skipf("skipping: %v", err)
	}
	return bin
}

// hostState is what the harness promises to put back.
type hostState struct {
	paths   map[string]bool // fixed host paths the daemons use: exist?
	sysctls map[string]string
	mounts  []string
	ledgers []string
}

func readHostState(t *testing.T, dir string) hostState {
	t.Helper()
	s := hostState{sysctls: saveSysctls(append(kubeletSysctls, "net.ipv4.ip_forward")...), paths: map[string]bool{}}
	// Only the kubelet's: make test runs other packages' daemons beside
	// this one, and the paths they share with its containerd
	// (/run/containerd, /var/lib/cni) come and go with them (shared.go;
	// make test's host check compares them once every daemon has stopped).
	for _, p := range []string{"/var/lib/kubelet", "/var/lib/kubelet/device-plugins", "/var/log/containers"} {
		s.paths[p] = len(notExisting(p)) == 0
	}
	links, _ := os.ReadDir("/var/log/containers")
	s.paths["/var/log/containers/*"] = len(links) > 0
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir) {
			s.mounts = append(s.mounts, f[4])
		}
	}
	// The records of this test's daemons (those of other packages' come
	// and go).
	records, _ := filepath.Glob(filepath.Join(LedgerDir, "*.json"))
	for _, r := range records {
		if l, err := loadLedger(r); err == nil && strings.HasPrefix(l.Dir, dir+"/") {
			s.ledgers = append(s.ledgers, r)
		}
	}
	return s
}

// restored checks that the host is as it was: sysctls, mounts under dir,
// the fixed paths, the records.
func (before hostState) restored(t *testing.T, dir string) {
	t.Helper()
	after := readHostState(t, dir)
	for name, v := range before.sysctls {
		if after.sysctls[name] != v {
			t.Errorf("sysctl %s = %s after teardown, was %s", name, after.sysctls[name], v)
		}
	}
	if len(after.mounts) > 0 {
		t.Errorf("mounts left under %s: %v", dir, after.mounts)
	}
	for p, existed := range before.paths {
		if after.paths[p] != existed {
			t.Errorf("%s: existed %t before, %t after", p, existed, after.paths[p])
		}
	}
	if fmt.Sprint(after.ledgers) != fmt.Sprint(before.ledgers) {
		t.Errorf("records in %s: %v, were %v", LedgerDir, after.ledgers, before.ledgers)
	}
}

// waitTunables waits until the kubelet's container manager has set its
// sysctls (kubeletTunables): it does so on its own schedule, after the
// kubelet is ready on a loaded machine.
func waitTunables(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var differ []string
		for _, name := range kubeletSysctls {
			if v, _ := readSysctl(name); v != kubeletTunables[name] {
				differ = append(differ, fmt.Sprintf("%s = %s", name, v))
			}
		}
		if len(differ) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the kubelet had not set its tunables %s after: %s (are kubeletTunables still what the container manager of kubelet %s sets?)",
				timeout, strings.Join(differ, ", "), KubeletVersion)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func staticSleeper(name string) *corev1.Pod {
	grace := int64(1)
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{
		TerminationGracePeriodSeconds: &grace,
		Containers:                    []corev1.Container{{Name: "app", Image: Image, Command: []string{"/bin/sleep", "100000"}}},
	}}
}

// waitRunning waits for a static pod's container, and returns its id.
func waitRunning(ctx context.Context, c *Containerd, pod string) (string, error) {
	cc, err := c.Dial(256 << 20)
	if err != nil {
		return "", err
	}
	defer cc.Close()
	rs := runtimeapi.NewRuntimeServiceClient(cc)
	for {
		resp, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
			State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
			LabelSelector: map[string]string{"io.kubernetes.pod.name": pod + "-" + KubeletNode},
		}})
		if err == nil && len(resp.GetContainers()) > 0 {
			return resp.GetContainers()[0].GetId(), nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("static pod %s not running: %v", pod, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// The kubelet runs a static pod on a pod network, and Stop puts the host
// back: the sysctls the kubelet and the bridge plugin set, the kubelet's
// bind mount of its root dir, its cgroup tree, the bridge, the records.
func TestKubeletStartsAndCleansUp(t *testing.T) {
	bin := requireKubelet(t)
	dir := t.TempDir()
	before := readHostState(t, dir)
	out, err := exec.Command(bin, "--version").Output()
	if err != nil || strings.TrimSpace(string(out)) != "Kubernetes "+KubeletVersion {
		t.Fatalf("%s --version: %q, %v; want Kubernetes %s (the Makefile's KUBELET_VERSION and testenv.KubeletVersion differ?)", bin, out, err, KubeletVersion)
	}
	c, err := StartContainerdWith(filepath.Join(dir, "containerd"), ContainerdOptions{PodNetwork: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	k, err := StartKubelet(KubeletOptions{Binary: bin, Dir: filepath.Join(dir, "kubelet"), Runtime: c})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			k.Stop()
		}
	}()
	if err := waitTunables(2 * time.Minute); err != nil {
		t.Error(err)
	}
	pod := staticSleeper("netpod")
	pod.Spec.HostNetwork = false
	if err := k.WriteStaticPod(pod); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id, err := waitRunning(ctx, c, "netpod")
	if err != nil {
		t.Fatalf("%v\n%s", err, k.LogTail(20))
	}
	ip := podIP(t, c, id)
	_, subnet, _ := net.ParseCIDR(c.Subnet)
	if !subnet.Contains(net.ParseIP(ip)) {
		t.Errorf("pod IP %q, want one in %s", ip, c.Subnet)
	}
	t.Logf("kubelet %s ran a static pod at %s on bridge %s", KubeletVersion, ip, c.Bridge)
	if !linkExists(c.Bridge) {
		t.Errorf("no bridge %s after a pod-network pod started", c.Bridge)
	}
	if entries, _ := os.ReadDir("/var/run/netns"); len(entries) > 0 {
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "cni-") {
				t.Errorf("network namespace %s in /var/run/netns: the private containerd should keep them in its state dir", e.Name())
			}
		}
	}
	if err := k.Stop(); err != nil {
		t.Errorf("kubelet Stop: %v", err)
	}
	stopped = true
	if err := c.Stop(); err != nil {
		t.Errorf("containerd Stop: %v", err)
	}
	before.restored(t, dir)
	if linkExists(c.Bridge) {
		t.Errorf("bridge %s left", c.Bridge)
	}
	for _, d := range cgroupDirs(k.ledger.Cgroup) {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("cgroup %s left", d)
		}
	}
}

// A kubelet that cannot start (a port taken, a cgroup layout it refuses, a
// broken build) is one line: its last error, wrapping ErrUnavailable (the
// tests skip on it outside CI), and nothing of it is left on the host.
func TestKubeletThatCannotStart(t *testing.T) {
	if err := Check("containerd", "runc", "ctr", "busybox"); err != nil {
		t.Skipf("skipping: %v", err)
	}
	dir := t.TempDir()
	before := readHostState(t, dir)
	fake := filepath.Join(dir, "kubelet")
	script := "#!/bin/sh\necho 'I1203 10:00:00.000000       1 server.go:1] \"starting\"'\n" +
		"echo 'E1203 10:00:00.100000       1 run.go:72] \"command failed\" err=\"failed to listen on 127.0.0.1:10255: address already in use\"'\nexit 1\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := StartContainerd(filepath.Join(dir, "containerd"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	start := time.Now()
	_, err = StartKubelet(KubeletOptions{Binary: fake, Dir: filepath.Join(dir, "k"), Runtime: c})
	if err == nil || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want one wrapping ErrUnavailable", err)
	}
	if !strings.Contains(err.Error(), "address already in use") || strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "starting") {
		t.Errorf("err = %q, want the one error line", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("took %s to give up", d)
	}
	after := readHostState(t, dir)
	if recs, _ := filepath.Glob(filepath.Join(LedgerDir, "kubelet-*"+filepath.Base(dir)+"*")); len(recs) > 0 || fmt.Sprint(after.sysctls) != fmt.Sprint(before.sysctls) {
		t.Errorf("left behind: records %v, sysctls %v (were %v)", recs, after.sysctls, before.sysctls)
	}
	t.Setenv("KUBELET_UNAVAILABLE", "the kubelet did not build: go: module lookup disabled")
	if _, err := KubeletBinary(); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "did not build") {
		t.Errorf("KubeletBinary with a failed build: %v", err)
	}
}

// A kubelet that is not the harness's (any process named kubelet without
// the test node's name) makes the harness refuse to start one: both would
// use /var/lib/kubelet/device-plugins and the same ports and sysctls.
func TestKubeletRefusedBesideAnother(t *testing.T) {
	if err := deviceManagerFree(); err != nil {
		t.Skipf("skipping: the machine already has one: %v", err)
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep")
	}
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(t.TempDir(), "kubelet")
	if err := os.WriteFile(fake, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(fake, "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	// /proc/PID/comm names the executable once it runs.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid)); strings.TrimSpace(string(comm)) == "kubelet" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the fake kubelet never ran")
		}
	}
	err = deviceManagerFree()
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), fmt.Sprintf("a kubelet (pid %d) runs on this machine", cmd.Process.Pid)) {
		t.Errorf("beside another kubelet: %v, want it refused, naming its pid", err)
	}
}

// A run killed with SIGKILL leaves a kubelet, its runtime, a running pod,
// mounts, cgroups and sysctls behind; the next run's CleanLeftovers removes
// all of it. The killed run is this test binary started again as a child.
func TestLeftoversOfAKilledRun(t *testing.T) {
	if os.Getenv("PLEG_TEST_KILLED_RUN") != "" {
		killedRun()
		return
	}
	bin := requireKubelet(t)
	dir := t.TempDir()
	before := readHostState(t, dir)
	line := killedChild(t, "TestLeftoversOfAKilledRun", "PLEG_TEST_KILLED_RUN="+dir, "KUBELET="+bin)
	var kubeletPid, containerdPid int
	fmt.Sscan(line, &kubeletPid, &containerdPid)
	time.Sleep(time.Second)
	for _, pid := range []int{kubeletPid, containerdPid} {
		if syscall.Kill(pid, 0) != nil {
			t.Fatalf("pid %d died with the test process: nothing is left to clean", pid)
		}
	}
	// Teardown must put them back whether the kubelet applied them before
	// the kill or after; this run checks they are there to put back.
	if err := waitTunables(2 * time.Minute); err != nil {
		t.Fatal(err)
	}

	done, err := CleanLeftovers()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("CleanLeftovers: %s", strings.Join(done, "; "))
	if len(done) != 2 {
		t.Errorf("CleanLeftovers removed %d records, want 2 (kubelet and containerd)", len(done))
	}
	for _, pid := range []int{kubeletPid, containerdPid} {
		if syscall.Kill(pid, 0) == nil {
			if st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); !strings.Contains(string(st), ") Z ") {
				t.Errorf("pid %d still runs", pid)
			}
		}
	}
	if shims := shimsOf(filepath.Join(dir, "containerd", "containerd.sock")); len(shims) > 0 {
		t.Errorf("shims still run: %v", shims)
	}
	before.restored(t, dir)
	if _, err := os.Stat(filepath.Join(dir, "kubelet")); err == nil {
		t.Errorf("%s/kubelet left", dir)
	}
	if cg := cgroupDirs(kubeletCgroupRoot(filepath.Join(dir, "kubelet"))); len(cg) > 0 {
		if _, err := os.Stat(cg[0]); err == nil {
			t.Errorf("cgroup %s left", cg[0])
		}
	}
}

// killedChild runs the test binary again as a child running test with env,
// waits for the line "READY ..." it prints once its daemons are up, kills
// it (its daemons live on, as a killed test run's do) and returns the rest
// of that line. CleanLeftovers runs at the end of t whatever t fails on.
func killedChild(t *testing.T, test string, env ...string) string {
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v")
	child.Env = append(os.Environ(), env...)
	// It must not outlive this test if this test dies first.
	child.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		buf := make([]byte, 64<<10)
		var all string
		for {
			n, err := stdout.Read(buf)
			all += string(buf[:n])
			if i := strings.Index(all, "READY "); i >= 0 && strings.Contains(all[i:], "\n") {
				ready <- strings.TrimSpace(all[i+6 : i+strings.Index(all[i:], "\n")])
				return
			}
			if err != nil {
				ready <- "FAILED: " + all
				return
			}
		}
	}()
	var line string
	select {
	case line = <-ready:
	case <-time.After(3 * time.Minute):
		child.Process.Kill()
		child.Wait()
		t.Fatal("the child run never got its daemons up")
	}
	if strings.HasPrefix(line, "FAILED") {
		child.Wait()
		t.Fatal(line)
	}
	// The test process dies; its daemons do not.
	child.Process.Kill()
	child.Wait()
	t.Cleanup(func() { CleanLeftovers() })
	return line
}

// killedRun is the child: a containerd, a kubelet and a running static pod
// on a pod network, then it waits to be killed.
func killedRun() {
	dir := os.Getenv("PLEG_TEST_KILLED_RUN")
	fail := func(err error) {
		fmt.Printf("FAILED %v\n", err)
		os.Exit(1)
	}
	c, err := StartContainerdWith(filepath.Join(dir, "containerd"), ContainerdOptions{PodNetwork: true})
	if err != nil {
		fail(err)
	}
	k, err := StartKubelet(KubeletOptions{Dir: filepath.Join(dir, "kubelet"), Runtime: c})
	if err != nil {
		fail(err)
	}
	pod := staticSleeper("orphan")
	pod.Spec.HostNetwork = false
	if err := k.WriteStaticPod(pod); err != nil {
		fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := waitRunning(ctx, c, "orphan"); err != nil {
		fail(err)
	}
	fmt.Printf("READY %d %d\n", k.Pid(), c.Pid())
	time.Sleep(time.Hour)
}

func podIP(t *testing.T, c *Containerd, containerID string) string {
	t.Helper()
	cc, err := c.Dial(256 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	rs := runtimeapi.NewRuntimeServiceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{Id: containerID}})
	if err != nil || len(cs.GetContainers()) != 1 {
		t.Fatalf("container %s: %v", containerID, err)
	}
	ss, err := rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: cs.GetContainers()[0].GetPodSandboxId()})
	if err != nil {
		t.Fatal(err)
	}
	return ss.GetStatus().GetNetwork().GetIp()
}

func shimsOf(socket string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), "containerd-shim") && strings.Contains(string(b), socket) {
			out = append(out, e.Name())
		}
	}
	return out
}
