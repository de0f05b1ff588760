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
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pleg-exporter/pleg_exporter/gc"
	"github.com/pleg-exporter/pleg_exporter/internal/fakecri"
)

func runGCBinary(t *testing.T, args ...string) (*gc.Report, int, string) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"gc", "--output=json"}, args...)...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	cmd.Run()
	r := &gc.Report{}
	if out.Len() > 0 {
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatalf("json: %v\n%s", err, out.String())
		}
	}
	return r, cmd.ProcessState.ExitCode(), stderr.String()
}

// Past the limit on the fake runtime: the plan keeps each pod's newest
// exited worker; a removal that hangs is timed out, reported and skipped,
// one the kubelet got to first counts as done; exit 1 for the one failure;
// the relist check after the run fits.
func TestGCHangsAndGoneOnFakeCRI(t *testing.T) {
	srv, err := fakecri.Start(filepath.Join(t.TempDir(), "cri.sock"), fakecri.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	sbs, cts := fakecri.Generate(fakecri.Spec{Ready: 20, Running: 20, Exited: 6000, PaddingBytes: 3000})
	srv.SetPopulation(sbs, cts)
	ep := "--runtime.endpoint=" + srv.Endpoint()

	dry, code, stderr := runGCBinary(t, ep)
	if code != 0 || dry.Recommended != "kubelet" || len(dry.Plans["kubelet"].Actions) != 6000-20 {
		t.Fatalf("dry run: exit %d, recommended %q, %d planned; %s", code, dry.Recommended, len(dry.Plans["kubelet"].Actions), stderr)
	}
	if srv.Calls("RemoveContainer") != 0 {
		t.Fatal("the dry run removed something")
	}
	hung, gone := dry.Plans["kubelet"].Actions[10].ID, dry.Plans["kubelet"].Actions[20].ID
	srv.HangRemove(hung)
	srv.FailRemove(status.Error(codes.NotFound, "no such container"), gone)

	r, code, stderr := runGCBinary(t, ep, "--apply", "--rate=100000", "--timeout=300ms")
	if code != 1 || r.Applied == nil {
		t.Fatalf("apply: exit %d (want 1), %s", code, stderr)
	}
	a := r.Applied
	if len(a.Failures) != 1 || a.Failures[0].Action.ID != hung || !a.Failures[0].TimedOut || a.Failures[0].Hint == "" ||
		a.Gone != 1 || a.Removed["container"] != 6000-20-2 {
		t.Errorf("applied: removed %v, gone %d, failures %+v", a.Removed, a.Gone, a.Failures)
	}
	if r.Check == nil || !r.Check.Fits {
		t.Errorf("check %+v", r.Check)
	}
	_, left := srv.Population()
	if len(left) != 20+20+2 { // running, each pod's newest, the hung one and the "gone" one (the fake kept it)
		t.Errorf("%d containers left", len(left))
	}
}

// SIGINT (Ctrl-C) or SIGTERM: the call in flight ends, the summary says
// how many were not made, exit 130.
func TestGCInterruptedOnFakeCRI(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		srv, err := fakecri.Start(filepath.Join(t.TempDir(), "cri.sock"), fakecri.Options{})
		if err != nil {
			t.Fatal(err)
		}
		sbs, cts := fakecri.Generate(fakecri.Spec{Ready: 2, Exited: 400})
		srv.SetPopulation(sbs, cts)
		cmd := exec.Command(binary, "gc", "--apply", "--rate=20", "--runtime.endpoint="+srv.Endpoint())
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); srv.Calls("RemoveContainer") < 10 && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
		}
		cmd.Process.Signal(sig)
		cmd.Wait()
		n := srv.Calls("RemoveContainer")
		_, left := srv.Population()
		if code := cmd.ProcessState.ExitCode(); code != 130 || !strings.Contains(out.String(), "INTERRUPTED") || n >= 398 ||
			len(left) != 400-int(n) || !strings.Contains(stderr.String(), "stopping after the call in flight") {
			t.Errorf("%v: exit %d after %d removals, %d left\n%s\n%s", sig, code, n, len(left), out.String(), stderr.String())
		}
		srv.Stop()
	}
}

func TestGCExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--runtime.endpoint=unix://" + filepath.Join(t.TempDir(), "none.sock")}, 2, "cannot list the runtime"},
		{[]string{"--rate=0"}, 1, "--rate must be positive"},
		{[]string{"--until-ratio=1.5"}, 1, "--until-ratio must be between 0"},
		{[]string{"--keep-per-container=-1"}, 1, "--keep-per-container must be 0 or more"},
		{[]string{"--timeout=0s"}, 1, "--timeout must be positive"},
		{[]string{"--runtime.endpoint=/run/containerd.sock"}, 1, "has no scheme"},
	} {
		_, code, stderr := runGCBinary(t, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, tc.code, tc.msg)
		}
	}
}

// A report that cannot be written (stdout on a full disk, a closed pipe)
// is its own exit code with the reason, not "the runtime cannot be
// reached": the runtime answered.
func TestReportThatCannotBeWrittenExits3(t *testing.T) {
	srv, err := fakecri.Start(filepath.Join(t.TempDir(), "cri.sock"), fakecri.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	sbs, cts := fakecri.Generate(fakecri.Spec{Ready: 2, Running: 2, Exited: 20})
	srv.SetPopulation(sbs, cts)
	for _, cmdName := range []string{"gc", "diagnose"} {
		full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
		if err != nil {
			t.Skipf("no /dev/full: %v", err)
		}
		cmd := exec.Command(binary, cmdName, "--output=json", "--runtime.endpoint="+srv.Endpoint())
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = full, &stderr
		cmd.Run()
		full.Close()
		if code := cmd.ProcessState.ExitCode(); code != 3 || !strings.Contains(stderr.String(), "cannot write the report") {
			t.Errorf("%s with stdout on /dev/full: exit %d, stderr %q; want 3 and the reason", cmdName, code, stderr.String())
		}
	}
}
