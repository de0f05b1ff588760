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

package deploy

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pleg-exporter/pleg_exporter/internal/fakecri"
)

// buildExporter builds the binary the unit starts.
func buildExporter(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pleg_exporter")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/pleg_exporter")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// unitValues returns the values of every KEY= line of the unit, in order.
func unitValues(unit, key string) []string {
	var vals []string
	for _, l := range strings.Split(unit, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), key+"="); ok {
			vals = append(vals, v)
		}
	}
	return vals
}

// syscallSet resolves a systemd system-call group (@name) or a call name
// the way systemd does, through systemd-analyze's own tables.
func syscallSet(t *testing.T, analyze, item string, into map[string]bool) {
	t.Helper()
	if !strings.HasPrefix(item, "@") {
		into[item] = true
		return
	}
	out, err := exec.Command(analyze, "syscall-filter", item).Output()
	if err != nil {
		t.Fatalf("systemd-analyze syscall-filter %s: %v", item, err)
	}
	for i, l := range strings.Split(string(out), "\n") {
		l = strings.TrimSpace(l)
		if i == 0 || l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		syscallSet(t, analyze, l, into)
	}
}

// allowedSyscalls applies the unit's SystemCallFilter= lines in order: the
// first, an allow list, sets the calls; each later ~ line removes some.
func allowedSyscalls(t *testing.T, analyze string, filters []string) map[string]bool {
	t.Helper()
	allowed := map[string]bool{}
	for i, f := range filters {
		deny := strings.HasPrefix(f, "~")
		if i == 0 && deny {
			t.Fatalf("SystemCallFilter=%s: the test expects an allow list first", f)
		}
		set := map[string]bool{}
		for _, item := range strings.Fields(strings.TrimPrefix(f, "~")) {
			syscallSet(t, analyze, item, set)
		}
		for s := range set {
			if deny {
				delete(allowed, s)
			} else {
				allowed[s] = true
			}
		}
	}
	return allowed
}

var (
	straceCall   = regexp.MustCompile(`^\d+\s+([a-z0-9_]+)\(`)
	straceSocket = regexp.MustCompile(`\bsocket\((AF_[A-Z0-9]+)`)
)

// The unit's SystemCallFilter= kills the process with SIGSYS on any other
// call, and RestrictAddressFamilies= fails its sockets; nothing here boots
// systemd to try them. So the exporter runs under strace through what it
// does in service (start-up, relists with the namespace breakdown, status
// probes that time out, scrapes of every endpoint, SIGTERM) and every call
// and socket family it used is checked against the unit as systemd
// resolves it.
func TestSystemdFiltersAllowWhatTheExporterDoes(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed (Debian's systemd package)")
	}
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace not installed (make deps installs it)")
	}
	unitBytes, err := os.ReadFile("systemd/pleg_exporter.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(unitBytes)
	allowed := allowedSyscalls(t, analyze, unitValues(unit, "SystemCallFilter"))
	families := map[string]bool{}
	for _, v := range unitValues(unit, "RestrictAddressFamilies") {
		for _, f := range strings.Fields(v) {
			families[f] = true
		}
	}
	if len(allowed) < 100 || len(families) == 0 {
		t.Fatalf("unit parsed to %d allowed calls and families %v", len(allowed), families)
	}

	dir := t.TempDir()
	srv, err := fakecri.Start(filepath.Join(dir, "cri.sock"), fakecri.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	sbs, cts := fakecri.Generate(fakecri.Spec{Ready: 3, NotReady: 2, Running: 3, Exited: 20, Unknown: 1})
	srv.SetPopulation(sbs, cts)
	for _, sb := range sbs {
		srv.HangStatus(sb.Id) // every probe runs into its deadline
	}

	bin := buildExporter(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	trace := filepath.Join(dir, "strace.out")
	cmd := exec.Command(strace, "-f", "-qq", "-o", trace, bin,
		"--runtime.endpoint="+srv.Endpoint(), "--web.listen-address="+addr,
		"--relist.interval=200ms", "--probe.timeout=100ms", "--collector.namespaces", "--log.level=warn")
	logs := &lockedBuffer{}
	cmd.Stderr = logs // the exporter's log, shown on failure
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// strace -o blocks fatal signals for itself: signals go to the
	// exporter, its tracee, and strace ends with it.
	tracee := func(sig syscall.Signal) error {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
		var pid int
		if err == nil && len(strings.Fields(string(b))) == 1 {
			_, err = fmt.Sscan(string(b), &pid)
		} else if err == nil {
			err = fmt.Errorf("strace has children %q, want the exporter alone", b)
		}
		if err != nil {
			return err
		}
		return syscall.Kill(pid, sig)
	}
	defer func() {
		if cmd.ProcessState == nil { // a failure before the SIGTERM below
			tracee(syscall.SIGKILL)
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()

	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	var timeouts bool
	for !timeouts && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		for _, path := range []string{"/", "/-/healthy", "/-/ready", "/metrics"} {
			resp, err := client.Get("http://" + addr + path)
			if err != nil {
				continue
			}
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), `pleg_status_probe_timeouts_total{kind="sandbox"} `) {
					timeouts = true
				}
			}
			resp.Body.Close()
		}
	}
	if !timeouts {
		t.Fatalf("no status probe timed out within 30s; the scenario did not run. Exporter log:\n%s", logs.String())
	}
	if err := tracee(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exporter under strace: %v\n%s", err, logs.String())
	}

	f, err := os.Open(trace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	used, bad, badFamilies := map[string]bool{}, map[string]bool{}, map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := straceCall.FindStringSubmatch(line); m != nil {
			used[m[1]] = true
			if !allowed[m[1]] {
				bad[m[1]] = true
			}
		}
		if m := straceSocket.FindStringSubmatch(line); m != nil && !families[m[1]] {
			badFamilies[m[1]] = true
		}
	}
	if len(used) < 20 {
		t.Fatalf("strace recorded only %d distinct calls: %v", len(used), keys(used))
	}
	if len(bad) > 0 {
		t.Errorf("the unit's SystemCallFilter would kill the exporter (SIGSYS) on: %v\nexporter log:\n%s", keys(bad), logs.String())
	}
	if len(badFamilies) > 0 {
		t.Errorf("the unit's RestrictAddressFamilies refuses sockets the exporter opens: %v", keys(badFamilies))
	}
	t.Logf("systemd filters: the exporter made %d distinct system calls, all allowed by the unit (%d allowed)", len(used), len(allowed))
}

// lockedBuffer collects a process's output while the test may read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func keys(m map[string]bool) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return fmt.Sprint(ks)
}
