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

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/crypto/bcrypt"

	"github.com/pleg-exporter/pleg_exporter/internal/fakecri"
	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "pleg_exporter-test")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "pleg_exporter")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

type exporter struct {
	cmd    *exec.Cmd
	addr   string
	stderr *syncBuffer
	done   chan error
}

// syncBuffer is the exporter's stderr, read by the test while the process
// still writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// waitLog waits until the log holds want n times, and returns the count.
func (e *exporter) waitLog(want string, n int) int {
	var got int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if got = strings.Count(e.stderr.String(), want); got >= n {
			break
		}
	}
	return got
}

func startExporter(t *testing.T, args ...string) *exporter {
	t.Helper()
	e := &exporter{stderr: &syncBuffer{}, done: make(chan error, 1)}
	var command []string
	if len(args) > 0 && args[0] == "serve" { // the command comes first
		command, args = args[:1], args[1:]
	}
	// Port 0: the exporter takes a free port and logs it, so no other
	// process on a busy machine can take it between a probe and the bind.
	e.cmd = exec.Command(binary, append(append(command, "--web.listen-address=127.0.0.1:0"), args...)...)
	e.cmd.Stderr = e.stderr
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { e.done <- e.cmd.Wait() }()
	t.Cleanup(func() {
		e.cmd.Process.Kill()
		<-e.done
		if t.Failed() {
			t.Logf("exporter log:\n%s", e.stderr)
		}
	})
	for deadline := time.Now().Add(30 * time.Second); e.addr == ""; time.Sleep(20 * time.Millisecond) {
		if m := listeningOn.FindStringSubmatch(e.stderr.String()); m != nil {
			e.addr = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("the exporter logged no listening address in 30s:\n%s", e.stderr)
		}
	}
	return e
}

// listeningOn is exporter-toolkit's log line of the bound address.
var listeningOn = regexp.MustCompile(`msg="Listening on" address=(\S+)`)

func (e *exporter) get(t *testing.T, path string) (int, string) {
	t.Helper()
	var lastErr error
	for i := 0; i < 100; i++ {
		resp, err := http.Get("http://" + e.addr + path)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return resp.StatusCode, string(b)
		}
		lastErr = err
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("GET %s: %v", path, lastErr)
	return 0, ""
}

func parse(t *testing.T, text string) map[string]*model.Sample {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*model.Sample{}
	vec, err := expfmt.ExtractSamples(&expfmt.DecodeOptions{Timestamp: model.Now()}, mapValues(mfs)...)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range vec {
		out[s.Metric.String()] = s
	}
	return out
}

func (e *exporter) waitFor(t *testing.T, series string, want float64) map[string]*model.Sample {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, body := e.get(t, "/metrics")
		s := parse(t, body)
		if v, ok := s[series]; ok && float64(v.Value) == want {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never became %v:\n%s", series, want, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestBinaryAgainstFakeCRI(t *testing.T) {
	srv, err := fakecri.Start(filepath.Join(t.TempDir(), "cri.sock"), fakecri.Options{RuntimeName: "containerd", RuntimeVersion: "1.7.24"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	srv.SetPopulation(fakecri.Generate(fakecri.Spec{Ready: 4, NotReady: 2, Created: 1, Running: 4, Exited: 30, Unknown: 2}))
	e := startExporter(t, "--runtime.endpoint="+srv.Endpoint(), "--relist.interval=100ms")
	s := e.waitFor(t, "pleg_runtime_up", 1)
	for series, want := range map[string]float64{
		`pleg_containers{state="exited"}`:  30,
		`pleg_containers{state="unknown"}`: 2,
		`pleg_sandboxes{state="notready"}`: 2,
		`pleg_relist_threshold_seconds`:    180,
		`pleg_relist_payload_limit_bytes`:  16777216,
		`pleg_runtime_info{api_version="v1", runtime="containerd", streaming="false", version="1.7.24"}`: 1,
	} {
		if v, ok := s[series]; !ok || float64(v.Value) != want {
			t.Errorf("%s = %v, want %v", series, v, want)
		}
	}
	if _, ok := s[`go_goroutines`]; !ok {
		t.Error("exporter self-metrics missing")
	}
	if code, body := e.get(t, "/"); code != 200 || !strings.Contains(body, "/metrics") {
		t.Errorf("landing page: %d", code)
	}
	if code, _ := e.get(t, "/-/ready"); code != 200 {
		t.Errorf("ready: %d", code)
	}

	promtool := testenv.RequireTool(t, "promtool")
	_, body := e.get(t, "/metrics")
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

func TestDisableExporterMetrics(t *testing.T) {
	e := startExporter(t, "--runtime.endpoint=unix://"+filepath.Join(t.TempDir(), "none.sock"), "--web.disable-exporter-metrics")
	s := e.waitFor(t, "pleg_runtime_up", 0)
	for k := range s {
		if strings.HasPrefix(k, "go_") || strings.HasPrefix(k, "process_") || strings.HasPrefix(k, "promhttp_") {
			t.Fatalf("self-metric %s exported", k)
		}
	}
}

// A missing runtime does not stop the exporter; when it appears the exporter
// recovers by itself.
func TestRuntimeAppearsLater(t *testing.T) {
	path := filepath.Join(t.TempDir(), "late.sock")
	e := startExporter(t, "--runtime.endpoint=unix://"+path, "--relist.interval=100ms")
	e.waitFor(t, "pleg_runtime_up", 0)
	srv, err := fakecri.Start(path, fakecri.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	srv.SetPopulation(fakecri.Generate(fakecri.Spec{Ready: 1, Running: 1}))
	e.waitFor(t, "pleg_runtime_up", 1)
	if n := strings.Count(e.stderr.String(), "relist failed"); n != 1 {
		t.Errorf("logged %d 'relist failed' lines, want 1 (once per state change)", n)
	}
}

func TestBadInputExitsWithOneLine(t *testing.T) {
	dir := t.TempDir()
	badYAML := filepath.Join(dir, "bad.yml")
	os.WriteFile(badYAML, []byte("basic_auth_users: [not, a, map\n"), 0o600)
	for name, args := range map[string][]string{
		"unknown flag":         {"--no-such-flag"},
		"endpoint no scheme":   {"--runtime.endpoint=/run/containerd/containerd.sock"},
		"bad runtime kind":     {"--runtime=podman"},
		"bad duration":         {"--relist.interval=soon"},
		"zero interval":        {"--relist.interval=0s"},
		"recv below limit":     {"--runtime.max-recv-bytes=1024"},
		"missing web config":   {"--web.config.file=" + filepath.Join(dir, "missing.yml")},
		"malformed web config": {"--web.config.file=" + badYAML},
		"relative metrics":     {"--web.telemetry-path=metrics"},
		"empty metrics path":   {"--web.telemetry-path="},
		"metrics on healthy":   {"--web.telemetry-path=/-/healthy"},
		"metrics on ready":     {"--web.telemetry-path=/-/ready"},
		"metrics bad pattern":  {"--web.telemetry-path=/{metrics"},
		"metrics shadows all":  {"--web.telemetry-path=/{path...}"},
		"zero idle timeout":    {"--web.idle-timeout=0s"},
	} {
		cmd := exec.Command(binary, append([]string{"--web.listen-address=" + freeAddr(t)}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		done := make(chan error, 1)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Errorf("%s: still running", name)
			continue
		}
		if cmd.ProcessState.ExitCode() != 1 {
			t.Errorf("%s: exit code %d, want 1", name, cmd.ProcessState.ExitCode())
		}
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		if len(lines) != 1 || !strings.Contains(lines[0], "error") {
			t.Errorf("%s: stderr = %q, want one error line", name, stderr.String())
		}
	}
}

func TestGracefulShutdownOnSIGTERM(t *testing.T) {
	e := startExporter(t, "--runtime.endpoint=unix://"+filepath.Join(t.TempDir(), "none.sock"))
	e.get(t, "/-/healthy")
	e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-e.done:
		e.done <- err
		if err != nil {
			t.Errorf("exit: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("did not exit on SIGTERM")
	}
}

func TestWebConfigBasicAuth(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "web.yml")
	os.WriteFile(cfg, []byte("basic_auth_users:\n  prometheus: "+string(hash)+"\n"), 0o600)
	e := startExporter(t, "--runtime.endpoint=unix://"+filepath.Join(t.TempDir(), "none.sock"), "--web.config.file="+cfg)
	if code, _ := e.get(t, "/metrics"); code != http.StatusUnauthorized {
		t.Errorf("no credentials: %d, want 401", code)
	}
	req, _ := http.NewRequest("GET", "http://"+e.addr+"/metrics", nil)
	req.SetBasicAuth("prometheus", "s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("with credentials: %d", resp.StatusCode)
	}
}

// The DaemonSet listens on [$(POD_IP)]:10391: the brackets make the same
// argument valid for an IPv4 and an IPv6 pod address.
func TestListenAddressBothFamilies(t *testing.T) {
	for _, host := range []string{"127.0.0.1", "::1"} {
		t.Run(host, func(t *testing.T) {
			l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
			if err != nil {
				t.Skipf("no %s loopback here: %v", host, err)
			}
			port := l.Addr().(*net.TCPAddr).Port
			l.Close()
			e := &exporter{addr: net.JoinHostPort(host, fmt.Sprint(port)), stderr: &syncBuffer{}, done: make(chan error, 1)}
			e.cmd = exec.Command(binary, fmt.Sprintf("--web.listen-address=[%s]:%d", host, port),
				"--runtime.endpoint=unix://"+filepath.Join(t.TempDir(), "none.sock"))
			e.cmd.Stderr = e.stderr
			if err := e.cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { e.done <- e.cmd.Wait() }()
			defer func() {
				e.cmd.Process.Kill()
				<-e.done
				if t.Failed() {
					t.Logf("exporter log:\n%s", e.stderr)
				}
			}()
			if code, body := e.get(t, "/-/healthy"); code != http.StatusOK {
				t.Errorf("[%s]: /-/healthy answered %d %q", host, code, body)
			}
		})
	}
}

// Idle keep-alive connections are closed after --web.idle-timeout, and
// connections that never send a request after the read-header timeout, so
// a client cannot hold goroutines and file descriptors forever. Measured on
// the exporter's own go_goroutines and process_open_fds.
func TestIdleConnectionsAreClosed(t *testing.T) {
	const conns = 1000
	e := startExporter(t, "--runtime.endpoint=unix://"+filepath.Join(t.TempDir(), "none.sock"), "--web.idle-timeout=3s")
	gauge := func(name string) float64 {
		t.Helper()
		// A fresh connection per read, closed at once, so the reading
		// itself leaves nothing behind.
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := c.Get("http://" + e.addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return float64(parse(t, string(b))[name].Value)
	}
	e.get(t, "/-/healthy")
	baseG, baseFD := gauge("go_goroutines"), gauge("process_open_fds")
	rss0 := rssKiB(t, e.cmd.Process.Pid)

	// Half send one keep-alive request and then nothing; half send nothing.
	open := make([]net.Conn, 0, conns)
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	req := []byte("GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n")
	for i := 0; i < conns; i++ {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		open = append(open, c)
		if i%2 == 0 {
			if _, err := c.Write(req); err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			if _, err := http.ReadResponse(bufioReader(c), nil); err != nil {
				t.Fatalf("connection %d: %v", i, err)
			}
		}
	}
	heldG, heldFD := gauge("go_goroutines"), gauge("process_open_fds")
	rss1 := rssKiB(t, e.cmd.Process.Pid)
	t.Logf("%d connections open: goroutines %.0f -> %.0f, fds %.0f -> %.0f, RSS %d -> %d KiB",
		conns, baseG, heldG, baseFD, heldFD, rss0, rss1)
	if heldFD < baseFD+conns*0.9 {
		t.Fatalf("only %.0f descriptors held for %d connections: the test did not open them", heldFD-baseFD, conns)
	}
	if grew := rss1 - rss0; grew > 64<<10 {
		t.Errorf("RSS grew by %d KiB for %d idle connections, want under 64 MiB", grew, conns)
	}

	// Every connection must be closed by the server: a read sees EOF.
	for i, c := range open {
		c.SetReadDeadline(time.Now().Add(45 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("connection %d (sent a request: %v): read %v, want EOF from the server closing it", i, i%2 == 0, err)
		}
	}
	// A few goroutines and descriptors come and go with gRPC's reconnects to
	// the missing runtime; a held connection costs one of each, 1000 here.
	const slack = 20
	var g, fd float64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if g, fd = gauge("go_goroutines"), gauge("process_open_fds"); g <= baseG+slack && fd <= baseFD+slack {
			break
		}
	}
	t.Logf("after the timeouts: goroutines %.0f, fds %.0f", g, fd)
	if g > baseG+slack || fd > baseFD+slack {
		t.Errorf("after the timeouts: goroutines %.0f (base %.0f), fds %.0f (base %.0f)", g, baseG, fd, baseFD)
	}
}

func bufioReader(c net.Conn) *bufio.Reader { return bufio.NewReaderSize(c, 512) }

func rssKiB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			var kib int
			fmt.Sscan(f[1], &kib)
			return kib
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// A runtime socket mounted as a file goes stale when the runtime re-creates
// it; /-/healthy then fails so the kubelet restarts the pod with a fresh
// mount, instead of the exporter staying blind (and paging) forever.
func TestHealthyFailsOnStaleSocketMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root")
	}
	host, pod := t.TempDir(), t.TempDir()
	srv, err := fakecri.Start(filepath.Join(host, "cri.sock"), fakecri.Options{RuntimeName: "containerd", RuntimeVersion: "2.1.0"})
	if err != nil {
		t.Fatal(err)
	}
	mounted := filepath.Join(pod, "cri.sock")
	os.WriteFile(mounted, nil, 0o600)
	if out, err := exec.Command("mount", "--bind", filepath.Join(host, "cri.sock"), mounted).CombinedOutput(); err != nil {
		t.Skipf("mount --bind: %v: %s", err, out)
	}
	defer exec.Command("umount", "-l", mounted).Run()
	e := startExporter(t, "--runtime.endpoint=unix://"+mounted, "--docker.host=none", "--relist.interval=100ms")
	e.waitFor(t, "pleg_runtime_up", 1)
	if code, body := e.get(t, "/-/healthy"); code != http.StatusOK {
		t.Fatalf("before the restart: %d %s", code, body)
	}
	// The runtime restarts: its socket is deleted and made again.
	srv.Stop()
	os.Remove(filepath.Join(host, "cri.sock"))
	srv2, err := fakecri.Start(filepath.Join(host, "cri.sock"), fakecri.Options{RuntimeName: "containerd", RuntimeVersion: "2.1.0"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv2.Stop()
	code, body := e.get(t, "/-/healthy")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "stale") || !strings.Contains(body, mounted) {
		t.Fatalf("after the restart: %d %q, want 503 naming the stale socket", code, body)
	}
	if n := e.waitLog("stale", 1); n != 1 {
		t.Errorf("logged the stale socket %d times, want once", n)
	}
	e.get(t, "/-/healthy")
	if n := e.waitLog("stale", 2); n != 1 {
		t.Errorf("logged the stale socket %d times after two probes, want once", n)
	}
}

// Each command takes its own flags: one the command does not read is an
// error naming it, not a flag silently ignored; --help of a command lists
// its flags and not the others'; the exporter's flags need no command name.
func TestFlagsPerCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"gc", "--web.listen-address=:0"}, "web.listen-address"},
		{[]string{"gc", "--relist.interval=1s"}, "relist.interval"},
		{[]string{"gc", "--probe.timeout=1s"}, "probe.timeout"},
		{[]string{"diagnose", "--web.config.file=x.yml"}, "web.config.file"},
		{[]string{"diagnose", "--apply"}, "apply"},
		{[]string{"diagnose", "--collector.namespaces"}, "collector.namespaces"},
		{[]string{"--apply"}, "apply"},
		{[]string{"serve", "--output=json"}, "output"},
	} {
		cmd := exec.Command(binary, tc.args...)
		out, err := cmd.CombinedOutput()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if cmd.ProcessState.ExitCode() != 1 || len(lines) != 1 || !strings.Contains(lines[0], "unknown long flag '--"+tc.flag+"'") {
			t.Errorf("%v: exit %d (%v), output %q; want 1 and one line naming --%s", tc.args, cmd.ProcessState.ExitCode(), err, out, tc.flag)
		}
	}

	help := func(args ...string) string {
		out, err := exec.Command(binary, append(args, "--help")...).Output()
		if err != nil {
			t.Fatalf("%v --help: %v", args, err)
		}
		return string(out)
	}
	for _, tc := range []struct {
		cmd      string
		has, not []string
	}{
		{"gc", []string{"--apply", "--rate", "--runtime.endpoint", "--log.level"}, []string{"--web.listen-address", "--relist.interval", "--probe.timeout", "--relist.status"}},
		{"diagnose", []string{"--output", "--top", "--probe.timeout", "relist.status", "--runtime.endpoint"}, []string{"--web.listen-address", "--apply", "--collector.namespaces"}},
		{"serve", []string{"--web.listen-address", "--relist.interval", "--collector.namespaces", "--runtime.endpoint"}, []string{"--apply", "--output", "--top"}},
	} {
		h := help(tc.cmd)
		for _, f := range tc.has {
			if !strings.Contains(h, f) {
				t.Errorf("%s --help does not list %s", tc.cmd, f)
			}
		}
		for _, f := range tc.not {
			if strings.Contains(h, f+"=") || strings.Contains(h, f+" ") {
				t.Errorf("%s --help lists %s, another command's flag", tc.cmd, f)
			}
		}
	}

	// serve's flags, without the command name and with it.
	for _, args := range [][]string{{}, {"serve"}} {
		e := startExporter(t, append(args, "--runtime.endpoint=unix://"+filepath.Join(t.TempDir(), "none.sock"), "--relist.interval=1s")...)
		if code, body := e.get(t, "/metrics"); code != http.StatusOK || !strings.Contains(body, "\npleg_runtime_up 0\n") {
			t.Errorf("%v: /metrics answered %d without pleg_runtime_up 0", args, code)
		}
	}
}
