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
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/internal/fakecri"
)

// The status pass through the binary: a running pod whose sandbox status
// call hangs is inspected once it changes, its call shows in flight while
// it hangs, the relist (and so the kubelet's age) waits for it, and the pod
// is reinspected at every relist after its deadline, with one log line.
func TestStatusPassHungSandbox(t *testing.T) {
	srv, err := fakecri.Start(filepath.Join(t.TempDir(), "cri.sock"), fakecri.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	sbs, cts := fakecri.Generate(fakecri.Spec{Ready: 3, Running: 3, Exited: 3})
	srv.SetPopulation(sbs, cts)
	srv.HangStatus(sbs[0].Id)
	e := startExporter(t, "--runtime.endpoint="+srv.Endpoint(), "--relist.interval=100ms", "--relist.timeout=3s",
		"--relist.status.startup-pods=0")
	e.waitFor(t, "pleg_runtime_up", 1)
	// Pod 0 changes: one of its containers exits.
	for _, c := range cts {
		if c.PodSandboxId == sbs[0].Id && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			c.State = runtimeapi.ContainerState_CONTAINER_EXITED
			break
		}
	}
	srv.SetPopulation(sbs, cts)
	deadline := time.Now().Add(30 * time.Second)
	var inFlight, lastSeen float64
	for time.Now().Before(deadline) {
		_, body := e.get(t, "/metrics")
		s := parse(t, body)
		if v := s[`pleg_relist_status_in_flight_seconds{rpc="PodSandboxStatus"}`]; v != nil && float64(v.Value) > 1.5 {
			inFlight, lastSeen = float64(v.Value), float64(s["pleg_last_seen_seconds"].Value)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if inFlight == 0 {
		t.Fatal("the hung PodSandboxStatus never showed in flight")
	}
	if lastSeen < inFlight {
		t.Errorf("last seen %.2fs while a call of the same relist is %.2fs in flight", lastSeen, inFlight)
	}
	s := e.waitFor(t, `pleg_relist_status_failures_total{code="DeadlineExceeded"}`, 2)
	if v := s["pleg_relist_reinspect_pods"]; v == nil || v.Value != 1 {
		t.Errorf("reinspect pods %v, want 1", v)
	}
	if v := s[`pleg_relist_status_calls_total{rpc="PodSandboxStatus"}`]; v == nil || v.Value < 2 {
		t.Errorf("PodSandboxStatus calls %v", v)
	}
	if n := strings.Count(e.stderr.String(), "pod status inspection failed"); n != 1 {
		t.Errorf("%d failure log lines for one pod failing twice, want 1:\n%s", n, e.stderr.String())
	}
	// It answers again.
	srv.UnhangStatus(sbs[0].Id)
	e.waitFor(t, "pleg_relist_reinspect_pods", 0)
	if !strings.Contains(e.stderr.String(), "pod status inspection answers again") {
		t.Errorf("no recovery line:\n%s", e.stderr.String())
	}
	// --no-relist.status: no pass, no series.
	e2 := startExporter(t, "--runtime.endpoint="+srv.Endpoint(), "--relist.interval=100ms", "--no-relist.status")
	s = e2.waitFor(t, "pleg_runtime_up", 1)
	for k := range s {
		if strings.HasPrefix(k, "pleg_relist_status_") || strings.HasPrefix(k, "pleg_relist_reinspect") {
			t.Errorf("--no-relist.status exports %s", k)
		}
	}
}
