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
	"hash/crc32"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/yaml"
)

// KubeletVersion is the kubelet the tests run: k8s.io/kubernetes at this
// version, built from the module proxy with the kubectl of the same version
// by scripts/build-kubernetes.sh into .tools/kubernetes-<version> (make test
// does it, once).
const KubeletVersion = "v1.37.2"

// KubeletNode is the node name the harness's kubelet runs as.
const KubeletNode = "pleg-test-node"

// KubeletOptions configure a real kubelet.
type KubeletOptions struct {
	Binary string // the built kubelet
	Dir    string // its root dir, certificates, manifests, logs and config
	// Runtime is the private containerd it manages.
	Runtime *Containerd
	// RuntimeEndpoint, when set, is where the kubelet talks CRI (runtime
	// and image service) instead of Runtime's socket: a proxy in front of
	// it. Teardown still goes to Runtime directly.
	RuntimeEndpoint string
	// MinContainerTTL keeps exited containers from the kubelet's container
	// GC for this long (--minimum-container-ttl-duration): the harness
	// creates pods through the CRI that the kubelet does not know, and their
	// containers would otherwise go at the next GC (every minute).
	MinContainerTTL time.Duration
	// FeatureGates sets the kubelet's feature gates (featureGates in its
	// configuration), e.g. CRIListStreaming, EventedPLEG.
	FeatureGates map[string]bool
	// StartIntoOverflow returns as soon as the kubelet serves /metrics and
	// /healthz, without waiting for a relist: one started on a node whose
	// lists are past the limit never makes one.
	StartIntoOverflow bool
	// ControlPlane, when set, registers the kubelet as the Node KubeletNode
	// with its own client certificate, as a kubeadm node does: its server
	// authenticates clients by the cluster's CA or a token (webhook) and
	// asks the API server to authorize them. It listens on the pod network's
	// gateway (Runtime needs PodNetwork), which is its node IP: the kubelet
	// refuses a loopback one, and the API server and Prometheus reach it
	// there, as they reach a node's InternalIP.
	ControlPlane *ControlPlane
}

// Kubelet is a real kubelet in standalone mode: static pods from a manifest
// directory, no API server, every port on loopback.
type Kubelet struct {
	Dir       string
	Manifests string // static pod manifests (checked every second)
	// NodeIP is the address its server listens on: 127.0.0.1, or with a
	// ControlPlane the pod network's gateway.
	NodeIP string
	// Port is its authenticated server (logs, exec, /metrics with a token).
	Port int
	// ReadOnlyAddr serves /metrics, /pods and /healthz without credentials.
	ReadOnlyAddr string
	HealthzAddr  string
	LogPath      string
	opts         KubeletOptions
	ledger       *ledger
	logMu        sync.Mutex
	logOffset    int64
	logPartial   string
	logLines     []LogLine
	args         []string
	cmd          *exec.Cmd
	log          *os.File
	done         chan struct{}
}

// kubeletTunables are the sysctls the kubelet's container manager sets and
// the values it sets them to, at KubeletVersion: setupKernelTunables in
// pkg/kubelet/cm/container_manager_linux.go (KernelTunableModify, the
// default without protectKernelDefaults), with the constants of
// k8s.io/component-helpers/node/util/sysctl (VMOvercommitMemoryAlways,
// VMPanicOnOOMInvokeOOMKiller, KernelPanicRebootTimeout,
// KernelPanicOnOopsAlways, RootMaxKeysSetting, RootMaxBytesSetting).
//
// They are the ledger's SetTo from the start, not read off the host once
// the kubelet is ready: the kubelet applies them in its runtime-dependent
// initialisation (updateRuntimeUp, after cAdvisor starts), which runs
// beside its PLEG, so on a loaded machine they land after the first relist
// and /healthz, or not before a killed run dies.
var kubeletTunables = map[string]string{
	"vm.overcommit_memory":      "1",
	"vm.panic_on_oom":           "0",
	"kernel.panic":              "10",
	"kernel.panic_on_oops":      "1",
	"kernel.keys.root_maxkeys":  "1000000",
	"kernel.keys.root_maxbytes": "25000000",
}

// kubeletSysctls are the names of kubeletTunables, sorted.
var kubeletSysctls = func() []string {
	names := make([]string, 0, len(kubeletTunables))
	for n := range kubeletTunables {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}()

// KubeletBinary returns the kubelet the tests run: $KUBELET (make test sets
// it to the cached build). The error wraps ErrUnavailable.
func KubeletBinary() (string, error) {
	if why := os.Getenv("KUBELET_UNAVAILABLE"); why != "" {
		return "", fmt.Errorf("%w: %s", ErrUnavailable, why)
	}
	p := os.Getenv("KUBELET")
	if p == "" {
		return "", fmt.Errorf("%w: KUBELET is not set (make test builds the kubelet %s into .tools/ and sets it)", ErrUnavailable, KubeletVersion)
	}
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%w: kubelet %s: %v (make test builds it)", ErrUnavailable, p, err)
	}
	return p, nil
}

// freePorts returns n distinct free TCP ports on 127.0.0.1.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

func kubeletConfig(o KubeletOptions, dir, cgroupRoot, nodeIP string, ports []int) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: %[1]q
imageServiceEndpoint: %[1]q
cgroupDriver: cgroupfs
cgroupRoot: %[2]q
# 1.37 refuses cgroup v1 unless told; the CI machines are v1.
failCgroupV1: false
failSwapOn: false
staticPodPath: %[3]q
fileCheckFrequency: 1s
podLogsDir: %[4]q
makeIPTablesUtilChains: false
address: %[8]s
port: %[5]d
readOnlyPort: %[6]d
healthzBindAddress: 127.0.0.1
healthzPort: %[7]d
# A test machine's disk may be fuller than a node's: no image GC, no
# eviction of the test's pods.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "0%%"
  nodefs.inodesFree: "0%%"
  imagefs.available: "0%%"
`, kubeletEndpoint(o), cgroupRoot, filepath.Join(dir, "manifests"), filepath.Join(dir, "pod-logs"),
		ports[0], ports[1], ports[2], nodeIP) + kubeletAuth(o) + featureGates(o.FeatureGates)
}

// kubeletAuth is how the kubelet's server admits clients: standalone,
// anyone on loopback; in a cluster, as a kubeadm node's does.
func kubeletAuth(o KubeletOptions) string {
	if o.ControlPlane == nil {
		return `registerNode: false
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
`
	}
	return fmt.Sprintf(`registerNode: true
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %q
authorization:
  mode: Webhook
`, o.ControlPlane.CAFile())
}

func kubeletEndpoint(o KubeletOptions) string {
	if o.RuntimeEndpoint != "" {
		return o.RuntimeEndpoint
	}
	return "unix://" + o.Runtime.Socket
}

func featureGates(gates map[string]bool) string {
	if len(gates) == 0 {
		return ""
	}
	names := make([]string, 0, len(gates))
	for n := range gates {
		names = append(names, n)
	}
	sort.Strings(names)
	out := "featureGates:\n"
	for _, n := range names {
		out += fmt.Sprintf("  %s: %v\n", n, gates[n])
	}
	return out
}

// StartKubelet starts a kubelet on o.Runtime and waits until its PLEG has
// relisted once. Everything it changes on the host (sysctls, its cgroup
// tree, the bind mount of its root dir) is recorded first, so Stop, or the
// next run after a killed one, puts it back.
func StartKubelet(o KubeletOptions) (k *Kubelet, err error) {
	if o.Binary == "" {
		if o.Binary, err = KubeletBinary(); err != nil {
			return nil, err
		}
	}
	if err := Check(); err != nil {
		return nil, err
	}
	if o.Runtime == nil {
		return nil, errors.New("kubelet: no runtime")
	}
	if o.Dir, err = filepath.Abs(o.Dir); err != nil {
		return nil, err
	}
	for _, d := range []string{"root", "certs", "manifests", "pod-logs"} {
		if err := os.MkdirAll(filepath.Join(o.Dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	nodeIP, err := kubeletAddress(o, ports)
	if err != nil {
		return nil, err
	}
	k = &Kubelet{
		Dir: o.Dir, Manifests: filepath.Join(o.Dir, "manifests"), opts: o, NodeIP: nodeIP, Port: ports[0],
		ReadOnlyAddr: net.JoinHostPort(nodeIP, fmt.Sprint(ports[1])), HealthzAddr: fmt.Sprintf("127.0.0.1:%d", ports[2]),
		LogPath: filepath.Join(o.Dir, "kubelet.log"),
	}
	cfg := filepath.Join(o.Dir, "config.yaml")
	// A cgroup root of its own: the kubelet's kubepods tree lives below it,
	// apart from any real node's, and goes with it.
	cgroupRoot := kubeletCgroupRoot(o.Dir)
	if err := os.WriteFile(cfg, []byte(kubeletConfig(o, o.Dir, "/"+cgroupRoot, nodeIP, ports)), 0o600); err != nil {
		return nil, err
	}
	if k.ledger, err = newLedger("kubelet", o.Dir); err != nil {
		return nil, err
	}
	k.ledger.Marker = "--config=" + cfg
	k.ledger.Sysctls = saveSysctls(kubeletSysctls...)
	k.ledger.SetTo = maps.Clone(kubeletTunables)
	k.ledger.Cgroup = cgroupRoot
	// Paths the kubelet uses whatever it is told: the device manager's
	// directory (it deletes every socket in it at start-up), the
	// /var/log/containers links (removed by their target).
	if err := deviceManagerFree(); err != nil {
		return nil, err
	}
	k.ledger.Created = notExisting("/var/lib/kubelet/device-plugins", "/var/log/containers")
	k.ledger.Files = []string{"/var/lib/kubelet/device-plugins/kubelet.sock"}
	if err := k.ledger.save(); err != nil {
		return nil, fmt.Errorf("record the kubelet in %s: %w", LedgerDir, err)
	}
	started := k // the named result is nil on the error paths
	defer func() {
		if err != nil {
			started.Stop()
		}
	}()
	if err := makeCgroup(cgroupRoot); err != nil {
		return nil, fmt.Errorf("cgroup %s: %w", cgroupRoot, err)
	}
	if k.args, err = k.commandLine(cfg); err != nil {
		return nil, err
	}
	if err := k.start(!o.StartIntoOverflow); err != nil {
		return nil, err
	}
	return k, nil
}

// kubeletAddress is the address the kubelet serves on: loopback, or in a
// cluster the pod network's gateway with the kubelet's own port (an address
// only it uses: the Prometheus Operator writes 10250 into the kubelet
// Endpoints whatever the Node reports), set in ports[0].
func kubeletAddress(o KubeletOptions, ports []int) (string, error) {
	if o.ControlPlane == nil {
		return "127.0.0.1", nil
	}
	gw, err := o.Runtime.Gateway()
	if err != nil {
		return "", fmt.Errorf("kubelet in a cluster: %w", err)
	}
	ports[0] = 10250
	return gw, nil
}

// commandLine is the kubelet's arguments besides its configuration file.
func (k *Kubelet) commandLine(cfg string) ([]string, error) {
	o := k.opts
	args := []string{
		"--config=" + cfg,
		"--root-dir=" + filepath.Join(o.Dir, "root"),
		"--cert-dir=" + filepath.Join(o.Dir, "certs"),
		"--hostname-override=" + KubeletNode,
		"--v=2",
	}
	if o.MinContainerTTL > 0 {
		args = append(args, "--minimum-container-ttl-duration="+o.MinContainerTTL.String())
	}
	if o.ControlPlane != nil {
		kubeconfig, err := o.ControlPlane.NodeKubeconfig(KubeletNode)
		if err != nil {
			return nil, err
		}
		args = append(args, "--kubeconfig="+kubeconfig, "--node-ip="+k.NodeIP)
	}
	return args, nil
}

// deviceManagerFree refuses to start a kubelet beside another one, or beside
// device plugins: the kubelet always uses /var/lib/kubelet/device-plugins
// and deletes every socket there when it starts.
func deviceManagerFree() error {
	const dir = "/var/lib/kubelet/device-plugins"
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Type()&os.ModeSocket != 0 && e.Name() != "kubelet.sock" {
			return fmt.Errorf("%w: %s holds device plugin socket %s; a test kubelet would delete it", ErrUnavailable, dir, e.Name())
		}
	}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		comm, err := os.ReadFile(filepath.Join("/proc", p.Name(), "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "kubelet" {
			continue
		}
		// A zombie (a killed run's kubelet whose parent died, not yet
		// reaped by PID 1) holds nothing, and its cmdline reads empty.
		if st, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "stat")); strings.Contains(string(st), ") Z ") {
			continue
		}
		if cmdline, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline")); !strings.Contains(string(cmdline), "--hostname-override="+KubeletNode) {
			return fmt.Errorf("%w: a kubelet (pid %s) runs on this machine; a test kubelet would take over its %s", ErrUnavailable, p.Name(), dir)
		}
	}
	return nil
}

// kubeletCgroupRoot names the cgroup the kubelet in dir puts its pods under.
func kubeletCgroupRoot(dir string) string {
	return fmt.Sprintf("pleg-exporter-test-%08x", crc32.ChecksumIEEE([]byte(dir)))
}

// Restart stops the kubelet process (SIGTERM, as systemd does) and starts
// it again with the same configuration, leaving its pods and host changes
// in place. It returns once the new process serves its metrics and
// /healthz, without waiting for a relist: a kubelet restarted into an
// overflow never makes one.
func (k *Kubelet) Restart() error {
	k.terminate()
	return k.start(false)
}

// terminate stops the kubelet process (SIGTERM, SIGKILL after 15 s) and
// closes its log.
func (k *Kubelet) terminate() {
	StopProcess(k.cmd, k.done, 15*time.Second)
	k.log.Close()
}

// start runs the kubelet and waits until it serves /metrics and /healthz,
// and with waitRelist until its PLEG has relisted once.
func (k *Kubelet) start(waitRelist bool) error {
	log, err := os.OpenFile(k.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(k.opts.Binary, k.args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start kubelet: %w", err)
	}
	k.cmd, k.log, k.done = cmd, log, make(chan struct{})
	go func() { cmd.Wait(); close(k.done) }()
	k.ledger.Pid = cmd.Process.Pid
	if err := k.ledger.save(); err != nil {
		return err
	}
	// Ready when its PLEG has relisted once (kubelet_pleg_last_seen_seconds
	// is set) and /healthz answers.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case <-k.done:
			return fmt.Errorf("%w: the kubelet exited during start-up: %s (log: %s)", ErrUnavailable, k.lastError(), k.LogPath)
		default:
		}
		if ms, err := k.Metrics(); err == nil {
			if v, ok := Gauge(ms, "kubelet_pleg_last_seen_seconds", nil); ok && (v > 0 || !waitRelist) {
				if code, _ := httpGet("http://" + k.HealthzAddr + "/healthz"); code == http.StatusOK {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: the kubelet was not ready after 2m (no PLEG relist, or /healthz failing): %s (log: %s)", ErrUnavailable, k.lastError(), k.LogPath)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// Pid is the kubelet's process id.
func (k *Kubelet) Pid() int { return k.cmd.Process.Pid }

// Exited reports whether the kubelet process has ended.
func (k *Kubelet) Exited() bool { return closed(k.done) }

// Stop stops the kubelet, removes every pod of its runtime (the static pods
// would otherwise keep running), and undoes its host changes: the bind
// mount of its root dir, its cgroup tree, the sysctls; then its directory.
func (k *Kubelet) Stop() error {
	if k.cmd != nil {
		k.terminate()
	}
	if c := k.opts.Runtime; c != nil && c.cmd != nil && !c.SkipPodRemoval {
		if cc, err := c.Dial(256 << 20); err == nil {
			removeAllPods(runtimeapi.NewRuntimeServiceClient(cc))
			cc.Close()
		}
	}
	if k.ledger == nil {
		return nil
	}
	return k.ledger.undo()
}

// WriteStaticPod puts a pod manifest in the static pod directory; the
// kubelet runs it as <name>-<node>.
func (k *Kubelet) WriteStaticPod(pod *corev1.Pod) error {
	if pod.APIVersion == "" {
		pod.APIVersion, pod.Kind = "v1", "Pod"
	}
	b, err := yaml.Marshal(pod)
	if err != nil {
		return err
	}
	tmp := filepath.Join(k.Dir, "."+pod.Name+".yaml")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	// Renamed into place, so the kubelet never reads half a file.
	return os.Rename(tmp, filepath.Join(k.Manifests, pod.Name+".yaml"))
}

// RemoveStaticPod deletes a manifest: the kubelet stops the pod.
func (k *Kubelet) RemoveStaticPod(name string) error {
	return os.Remove(filepath.Join(k.Manifests, name+".yaml"))
}

// Metrics scrapes the kubelet's /metrics on its read-only port.
func (k *Kubelet) Metrics() (map[string]*dto.MetricFamily, error) {
	return ScrapeMetrics("http://" + k.ReadOnlyAddr + "/metrics")
}

// ProbeMetrics scrapes /metrics/probes: prober_probe_total, the results of
// the liveness, readiness and startup probes the kubelet runs.
func (k *Kubelet) ProbeMetrics() (map[string]*dto.MetricFamily, error) {
	return ScrapeMetrics("http://" + k.ReadOnlyAddr + "/metrics/probes")
}

// lastError is the kubelet's last error line (klog E or F), else its last
// line: the one-line reason it did not start.
func (k *Kubelet) lastError() string {
	lines := strings.Split(k.LogTail(200), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "E") || strings.HasPrefix(lines[i], "F") {
			return strings.TrimSpace(lines[i])
		}
	}
	return strings.TrimSpace(lines[len(lines)-1])
}

// LogTail is the end of the kubelet's log.
func (k *Kubelet) LogTail(lines int) string { return tailFile(k.LogPath, lines) }

// LogLine is one line of the kubelet's log and the time klog stamped on it.
type LogLine struct {
	At   time.Time
	Text string
}

// klog's header: Lmmdd hh:mm:ss.uuuuuu threadid file:line]
var klogHeader = regexp.MustCompile(`^[IWEF](\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})\.(\d{6}) `)

// readLog parses what the kubelet logged since the last call.
func (k *Kubelet) readLog() {
	f, err := os.Open(k.LogPath)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(k.logOffset, io.SeekStart); err != nil {
		return
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return
	}
	k.logOffset += int64(len(b))
	text := k.logPartial + string(b)
	end := strings.LastIndexByte(text, '\n')
	if end < 0 {
		k.logPartial = text
		return
	}
	k.logPartial = text[end+1:]
	now := time.Now()
	for _, line := range strings.Split(text[:end], "\n") {
		if at, ok := klogTime(line, now); ok {
			k.logLines = append(k.logLines, LogLine{At: at, Text: line})
		}
	}
}

// FindLog returns the first line after since that contains every one of
// substrs.
func (k *Kubelet) FindLog(since time.Time, substrs ...string) (LogLine, bool) {
	k.logMu.Lock()
	defer k.logMu.Unlock()
	k.readLog()
	for _, l := range k.logLines {
		if l.At.Before(since) {
			continue
		}
		match := true
		for _, s := range substrs {
			if !strings.Contains(l.Text, s) {
				match = false
				break
			}
		}
		if match {
			return l, true
		}
	}
	return LogLine{}, false
}

// LogSeen says how many of the log's lines FindLog has read, and the last
// one, for a failure's message.
func (k *Kubelet) LogSeen() (int, LogLine) {
	k.logMu.Lock()
	defer k.logMu.Unlock()
	k.readLog()
	if len(k.logLines) == 0 {
		return 0, LogLine{}
	}
	return len(k.logLines), k.logLines[len(k.logLines)-1]
}

// WaitLog polls the log for FindLog's line until timeout.
func (k *Kubelet) WaitLog(since time.Time, timeout time.Duration, substrs ...string) (LogLine, bool) {
	deadline := time.Now().Add(timeout)
	for {
		if l, ok := k.FindLog(since, substrs...); ok {
			return l, true
		}
		if time.Now().After(deadline) {
			return LogLine{}, false
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// klogTime reads klog's header time (local time, no year: the year of ref).
func klogTime(line string, ref time.Time) (time.Time, bool) {
	m := klogHeader.FindStringSubmatch(line)
	if m == nil {
		return time.Time{}, false
	}
	// strconv, not fmt.Sscan: Sscan reads "08" and "09" as octal, fails,
	// and leaves 0 (every line of 08:xx, of minute 08 or second 09 was
	// dated wrong).
	var n [6]int
	for i := range n {
		n[i], _ = strconv.Atoi(m[i+1])
	}
	t := time.Date(ref.Year(), time.Month(n[0]), n[1], n[2], n[3], n[4], n[5]*1000, time.Local)
	if t.Sub(ref) > 180*24*time.Hour { // the log is from December, ref from January
		t = t.AddDate(-1, 0, 0)
	}
	return t, true
}

// ScrapeMetrics fetches and parses a Prometheus text exposition.
func ScrapeMetrics(url string) (map[string]*dto.MetricFamily, error) {
	cl := &http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// Gauge returns the value of the sample of name whose labels include
// labels (a gauge's or counter's value, or an untyped one).
func Gauge(ms map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	mf, ok := ms[name]
	if !ok {
		return 0, false
	}
	for _, m := range mf.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Untyped != nil:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

// ByLabel returns every sample of name keyed by the value of label.
func ByLabel(ms map[string]*dto.MetricFamily, name, label string) map[string]float64 {
	out := map[string]float64{}
	mf, ok := ms[name]
	if !ok {
		return out
	}
	for _, m := range mf.GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == label {
				out[lp.GetValue()] = m.GetGauge().GetValue() + m.GetCounter().GetValue() + m.GetUntyped().GetValue()
			}
		}
	}
	return out
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	have := map[string]string{}
	for _, lp := range m.GetLabel() {
		have[lp.GetName()] = lp.GetValue()
	}
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

func httpGet(url string) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(b)
}
