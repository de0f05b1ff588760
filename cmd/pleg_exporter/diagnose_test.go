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
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pleg-exporter/pleg_exporter/diagnose"
	"github.com/pleg-exporter/pleg_exporter/internal/fakecri"
)

type diagReport struct {
	AtRisk     bool           `json:"at_risk"`
	Containers map[string]int `json:"containers"`
	Sandboxes  map[string]int `json:"sandboxes"`
	Fallback   bool           `json:"counted_through_fallback"`
	Namespaces []struct {
		Name       string `json:"name"`
		Containers int    `json:"containers"`
	} `json:"top_namespaces_by_containers"`
	Probes []struct {
		Kind, ID, Result string
	} `json:"slowest_status_calls"`
	Cleanup        []struct{ Command string } `json:"cleanup"`
	Inspected      int                        `json:"pods_inspected"`
	StatusFailures []diagnose.StatusFailure   `json:"pod_status_failures"`
}

func runDiag(t *testing.T, args ...string) (diagReport, int, string) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"diagnose", "--output=json"}, args...)...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	cmd.Run()
	var r diagReport
	if out.Len() > 0 {
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatalf("json: %v\n%s", err, out.String())
		}
	}
	return r, cmd.ProcessState.ExitCode(), stderr.String()
}

func TestDiagnosePastTheLimitWithAHangingSandbox(t *testing.T) {
	srv, err := fakecri.Start(filepath.Join(t.TempDir(), "cri.sock"), fakecri.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	sbs, cts := fakecri.Generate(fakecri.Spec{Namespaces: []string{"leaky", "default"}, Ready: 20, NotReady: 4, Running: 10, Exited: 6000, PaddingBytes: 3000})
	srv.SetPopulation(sbs, cts)
	srv.HangStatus(sbs[20].Id)
	r, code, stderr := runDiag(t, "--runtime.endpoint="+srv.Endpoint(), "--probe.timeout=300ms")
	if code != 1 || !r.AtRisk {
		t.Fatalf("exit %d at risk %v; stderr %s", code, r.AtRisk, stderr)
	}
	if !r.Fallback || r.Containers["exited"] != 6000 || r.Containers["running"] != 10 || r.Sandboxes["notready"] != 4 {
		t.Errorf("counts %v %v fallback %v", r.Containers, r.Sandboxes, r.Fallback)
	}
	want := map[string]int{}
	for _, c := range cts {
		want[c.Labels["io.kubernetes.pod.namespace"]]++
	}
	if len(r.Namespaces) != 2 || r.Namespaces[0].Containers != max(want["leaky"], want["default"]) {
		t.Errorf("namespaces %+v, runtime %v", r.Namespaces, want)
	}
	if len(r.Probes) == 0 || r.Probes[0].ID != sbs[20].Id || r.Probes[0].Result != "TIMED OUT" {
		t.Errorf("probes %+v", r.Probes)
	}
	if srv.Calls("RemoveContainer") != 0 || srv.Calls("RemovePodSandbox") != 0 {
		t.Error("diagnose changed the runtime")
	}
}

// --probe.max-per-cycle is honoured as given: 0 makes no status call, the
// default probes the suspects.
func TestDiagnoseProbesFollowTheFlag(t *testing.T) {
	srv, err := fakecri.Start(filepath.Join(t.TempDir(), "cri.sock"), fakecri.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	srv.SetPopulation(fakecri.Generate(fakecri.Spec{Ready: 2, NotReady: 3, Running: 2, Exited: 4, Unknown: 2}))
	r, code, stderr := runDiag(t, "--runtime.endpoint="+srv.Endpoint(), "--probe.max-per-cycle=0", "--no-relist.status")
	if code > 1 || len(r.Probes) != 0 || srv.Calls("PodSandboxStatus")+srv.Calls("ContainerStatus") != 0 {
		t.Fatalf("--probe.max-per-cycle=0: exit %d, %d probes reported, %d status calls made; stderr %s", code, len(r.Probes),
			srv.Calls("PodSandboxStatus")+srv.Calls("ContainerStatus"), stderr)
	}
	r, _, _ = runDiag(t, "--runtime.endpoint="+srv.Endpoint())
	if len(r.Probes) != 5 {
		t.Fatalf("default: %d probes, want the 3 notready sandboxes and 2 unknown containers", len(r.Probes))
	}
}

func TestDiagnoseUnreachableExits2(t *testing.T) {
	_, code, stderr := runDiag(t, "--runtime.endpoint=unix://"+filepath.Join(t.TempDir(), "none.sock"), "--relist.timeout=2s")
	if code != 2 || !strings.Contains(stderr, "cannot list the runtime") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// The exporter's probes: a hung status call is counted as a timeout while
// relists go on undisturbed.
func TestProbeTimeoutsExported(t *testing.T) {
	srv, err := fakecri.Start(filepath.Join(t.TempDir(), "cri.sock"), fakecri.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	sbs, cts := fakecri.Generate(fakecri.Spec{Ready: 2, NotReady: 2, Running: 2, Exited: 4})
	srv.SetPopulation(sbs, cts)
	srv.HangStatus(sbs[2].Id, sbs[3].Id)
	// Without the status pass's start-up inspections: the probes alone.
	e := startExporter(t, "--runtime.endpoint="+srv.Endpoint(), "--relist.interval=200ms", "--probe.timeout=1s", "--collector.namespaces",
		"--relist.status.startup-pods=0")
	s := e.waitFor(t, `pleg_status_probe_timeouts_total{kind="sandbox"}`, 2)
	if v := s["pleg_last_seen_seconds"]; v == nil || float64(v.Value) > 1 {
		t.Errorf("last seen %v while probes hang: relists were held up", v)
	}
	if v := s[`pleg_status_probe_duration_seconds_count{kind="sandbox"}`]; v == nil || v.Value < 2 {
		t.Errorf("probe histogram %v", v)
	}
	found := false
	for k := range s {
		if strings.HasPrefix(k, `pleg_namespace_containers{namespace="default"`) {
			found = true
		}
	}
	if !found {
		t.Error("pleg_namespace_containers missing with --collector.namespaces")
	}
	time.Sleep(10 * time.Millisecond)
}

// The seed's failure: two running pods whose PodSandboxStatus hangs.
// diagnose makes the kubelet's GetPodStatus of every pod, each on
// --probe.timeout, and names both pods, the call and where to look.
func TestDiagnoseNamesPodsWhoseStatusHangs(t *testing.T) {
	srv, err := fakecri.Start(filepath.Join(t.TempDir(), "cri.sock"), fakecri.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	sbs, cts := fakecri.Generate(fakecri.Spec{Ready: 5, Running: 5, Exited: 5})
	srv.SetPopulation(sbs, cts)
	srv.HangStatus(sbs[1].Id, sbs[3].Id)
	r, code, stderr := runDiag(t, "--runtime.endpoint="+srv.Endpoint(), "--probe.timeout=300ms")
	if code != 1 || !r.AtRisk {
		t.Fatalf("exit %d at risk %v; stderr %s", code, r.AtRisk, stderr)
	}
	if r.Inspected != 5 || len(r.StatusFailures) != 2 {
		t.Fatalf("inspected %d, failures %+v", r.Inspected, r.StatusFailures)
	}
	for i, sb := range []int{1, 3} {
		f := r.StatusFailures[i]
		want := sbs[sb].Metadata.Namespace + "/" + sbs[sb].Metadata.Name
		if f.Pod != want || f.RPC != "PodSandboxStatus" || f.ID != sbs[sb].Id || f.Code != "DeadlineExceeded" || len(f.Look) == 0 {
			t.Errorf("failure %d: %+v, want %s", i, f, want)
		}
	}
	cmd := exec.Command(binary, "diagnose", "--runtime.endpoint="+srv.Endpoint(), "--probe.timeout=300ms")
	out, _ := cmd.Output()
	text := string(out)
	for _, want := range []string{"Pods whose status calls fail", sbs[1].Metadata.Name, sbs[3].Metadata.Name, "PodSandboxStatus", "ps -eo pid,etime,args | grep -F -- " + sbs[1].Id} {
		if !strings.Contains(text, want) {
			t.Errorf("text report lacks %q:\n%s", want, text)
		}
	}
}
