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
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The environment of fakeKubelet: the test binary started as a kubelet.
const (
	envFakeKubelet = "PLEG_TEST_FAKE_KUBELET" // the fake sysctl root
	// envTunablesAfter is how long after its first /healthz answer the fake
	// applies the kubelet's tunables ("never": it does not).
	envTunablesAfter = "PLEG_TEST_TUNABLES_AFTER"
)

// fakeKubelet stands in for a kubelet whose container manager starts late,
// as a real one does on a loaded machine: it serves /metrics (a PLEG that
// has relisted) and /healthz on the ports of its --config, and only a while
// after its first /healthz answer, once StartKubelet has returned, writes
// kubeletTunables into the fake sysctl root, then touches DIR/applied.
func fakeKubelet() {
	root := os.Getenv(envFakeKubelet)
	var cfg string
	for _, a := range os.Args[1:] {
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			cfg = v
		}
	}
	raw, err := os.ReadFile(cfg)
	if err != nil {
		fmt.Println("E fake kubelet:", err)
		os.Exit(1)
	}
	port := func(key string) string {
		m := regexp.MustCompile(`(?m)^` + key + `: (\d+)$`).FindSubmatch(raw)
		if m == nil {
			fmt.Printf("E fake kubelet: no %s in %s\n", key, cfg)
			os.Exit(1)
		}
		return "127.0.0.1:" + string(m[1])
	}
	after, never := time.Duration(0), os.Getenv(envTunablesAfter) == "never"
	if !never {
		if after, err = time.ParseDuration(os.Getenv(envTunablesAfter)); err != nil {
			fmt.Println("E fake kubelet:", err)
			os.Exit(1)
		}
	}
	var once sync.Once
	apply := func() {
		time.Sleep(after)
		for name, v := range kubeletTunables {
			if err := os.WriteFile(filepath.Join(root, strings.ReplaceAll(name, ".", "/")), []byte(v+"\n"), 0o644); err != nil {
				fmt.Println("E fake kubelet:", err)
			}
		}
		os.WriteFile(filepath.Join(root, "applied"), nil, 0o644)
	}
	serve := func(addr string, h http.HandlerFunc) {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Println("E fake kubelet:", err)
			os.Exit(1)
		}
		go http.Serve(l, h)
	}
	serve(port("readOnlyPort"), func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "# TYPE kubelet_pleg_last_seen_seconds gauge\nkubelet_pleg_last_seen_seconds 1.7e+09\n")
	})
	serve(port("healthzPort"), func(w http.ResponseWriter, r *http.Request) {
		if !never {
			once.Do(func() { go apply() })
		}
		fmt.Fprint(w, "ok")
	})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	<-sig
	os.Exit(0)
}

// A host as the tests find it: the kernel's defaults for the sysctls the
// kubelet changes.
var hostDefaults = map[string]string{
	"vm.overcommit_memory": "0", "vm.panic_on_oom": "0", "kernel.panic": "1", "kernel.panic_on_oops": "0",
	"kernel.keys.root_maxkeys": "200", "kernel.keys.root_maxbytes": "20000",
}

// fakeSysctls points the harness at a fake /proc/sys holding values, for
// the test's length.
func fakeSysctls(t *testing.T, values map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, v := range values {
		p := filepath.Join(root, strings.ReplaceAll(name, ".", "/"))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := sysctlRoot
	sysctlRoot = root
	t.Cleanup(func() { sysctlRoot = old })
	return root
}

// logLines collects what the harness logs, for the test's length.
func logLines(t *testing.T) func() []string {
	var mu sync.Mutex
	var lines []string
	old := Logf
	Logf = func(format string, args ...any) {
		mu.Lock()
		lines = append(lines, fmt.Sprintf(format, args...))
		mu.Unlock()
		t.Logf("testenv: "+format, args...)
	}
	t.Cleanup(func() { Logf = old })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), lines...)
	}
}

// startLateKubelet starts fakeKubelet through StartKubelet, applying its
// tunables after (or never), and waits until it has applied them.
func startLateKubelet(t *testing.T, root string, after string) *Kubelet {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "kubelet")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexec "+os.Args[0]+` "$@"`+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(envFakeKubelet, root)
	t.Setenv(envTunablesAfter, after)
	k, err := StartKubelet(KubeletOptions{Binary: script, Dir: filepath.Join(dir, "k"),
		Runtime: &Containerd{Socket: filepath.Join(dir, "no-runtime.sock")}})
	if err != nil {
		t.Fatal(err)
	}
	// What StartKubelet recorded when it returned, before the tunables.
	if v, _ := readSysctl("kernel.panic"); after != "never" && v != hostDefaults["kernel.panic"] {
		t.Fatalf("kernel.panic = %s when StartKubelet returned: the fake kubelet applied its tunables too early to show a late one", v)
	}
	if after != "never" {
		deadline := time.Now().Add(time.Minute)
		for {
			if _, err := os.Stat(filepath.Join(root, "applied")); err == nil {
				break
			}
			if time.Now().After(deadline) {
				k.Stop()
				t.Fatal("the fake kubelet did not apply its tunables within 1m")
			}
			time.Sleep(50 * time.Millisecond)
		}
		for name, v := range kubeletTunables {
			if now, _ := readSysctl(name); now != v {
				t.Fatalf("%s = %s under the fake kubelet, want %s", name, now, v)
			}
		}
	}
	return k
}

func wantSysctls(t *testing.T, want map[string]string) {
	t.Helper()
	for name, v := range want {
		if now, err := readSysctl(name); err != nil || now != v {
			t.Errorf("sysctl %s = %q (%v) after teardown, want %s", name, now, err, v)
		}
	}
}

// A kubelet applies its tunables when its container manager starts, which
// on a loaded machine is after StartKubelet has returned (the first relist
// and /healthz come first). Teardown puts them back all the same: on Stop,
// from a killed run's record, and not where someone else changed a value
// since; a kubelet that never applies them and a sysctl that cannot be
// written get one log line or error each.
func TestTeardownRestoresTunablesAppliedLate(t *testing.T) {
	if err := Check(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	t.Run("stop", func(t *testing.T) {
		fakeSysctls(t, hostDefaults)
		lines := logLines(t)
		k := startLateKubelet(t, sysctlRoot, "2s")
		if err := k.Stop(); err != nil {
			t.Fatal(err)
		}
		wantSysctls(t, hostDefaults)
		if l := lines(); len(l) > 0 {
			t.Errorf("log lines on a clean teardown: %q", l)
		}
	})
	t.Run("killed run", func(t *testing.T) {
		fakeSysctls(t, hostDefaults)
		k := startLateKubelet(t, sysctlRoot, "2s")
		// The test process dies with the kubelet's record on disk; the next
		// run reads it (CleanLeftovers) once the kubelet is gone.
		rec := k.ledger.path
		k.cmd.Process.Kill()
		<-k.done
		k.log.Close()
		l, err := loadLedger(rec)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.undo(); err != nil {
			t.Fatal(err)
		}
		wantSysctls(t, hostDefaults)
		if _, err := os.Stat(rec); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("record %s left: %v", rec, err)
		}
	})
	t.Run("someone else", func(t *testing.T) {
		root := fakeSysctls(t, hostDefaults)
		lines := logLines(t)
		k := startLateKubelet(t, root, "1s")
		os.WriteFile(filepath.Join(root, "kernel", "panic"), []byte("30\n"), 0o644) // an operator, say
		if err := k.Stop(); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{}
		for n, v := range hostDefaults {
			want[n] = v
		}
		want["kernel.panic"] = "30"
		wantSysctls(t, want)
		l := lines()
		if len(l) != 1 || !strings.Contains(l[0], "kernel.panic = 30") || !strings.Contains(l[0], "someone else") {
			t.Errorf("log lines %q, want one naming kernel.panic = 30 as someone else's", l)
		}
	})
	t.Run("never applied", func(t *testing.T) {
		fakeSysctls(t, hostDefaults)
		lines := logLines(t)
		k := startLateKubelet(t, sysctlRoot, "never")
		if err := k.Stop(); err != nil {
			t.Fatal(err)
		}
		wantSysctls(t, hostDefaults)
		l := lines()
		if len(l) != 1 || !strings.Contains(l[0], "never set") || !strings.Contains(l[0], "kernel.panic (still 1, not 10)") {
			t.Errorf("log lines %q, want one saying the kubelet never set its tunables", l)
		}
	})
	t.Run("cannot write", func(t *testing.T) {
		fakeSysctls(t, hostDefaults)
		lines := logLines(t)
		k := startLateKubelet(t, sysctlRoot, "1s")
		old := writeSysctl
		writeSysctl = func(path, value string) error {
			if strings.HasSuffix(path, "/vm/overcommit_memory") {
				return &os.PathError{Op: "open", Path: path, Err: syscall.EROFS}
			}
			return old(path, value)
		}
		defer func() { writeSysctl = old }()
		err := k.Stop()
		if err == nil || !strings.Contains(err.Error(), "vm.overcommit_memory") || !errors.Is(err, syscall.EROFS) || strings.Count(err.Error(), "\n") > 0 {
			t.Errorf("Stop: %v, want one line naming vm.overcommit_memory and the read-only file system", err)
		}
		want := map[string]string{}
		for n, v := range hostDefaults {
			want[n] = v
		}
		want["vm.overcommit_memory"] = "1"
		wantSysctls(t, want) // every other one is put back
		// Its record stays for the next run to finish the job, and into the
		// fake tree, never the host's.
		writeSysctl = old
		l, err := loadLedger(k.ledger.path)
		if err != nil {
			t.Fatalf("the record of a teardown that failed: %v", err)
		}
		if l.SysctlRoot != sysctlRoot {
			t.Errorf("the record's sysctl root is %q, want the fake %q", l.SysctlRoot, sysctlRoot)
		}
		if len(l.Sysctls) != 1 || l.Sysctls["vm.overcommit_memory"] != "0" {
			t.Errorf("the record holds sysctls %v, want only the one not put back", l.Sysctls)
		}
		if err := l.undo(); err != nil {
			t.Fatal(err)
		}
		wantSysctls(t, hostDefaults)
		if l := lines(); len(l) > 0 {
			t.Errorf("log lines: %q", l)
		}
	})
}
