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

package pleg_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/internal/fakecri"
	"github.com/pleg-exporter/pleg_exporter/pleg"
	"github.com/pleg-exporter/pleg_exporter/runtime/cri"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

type probeRecorder struct {
	mu     sync.Mutex
	probes []kubecontainer.ProbeResult
}

func (r *probeRecorder) Observe(pleg.State) {}
func (r *probeRecorder) ObserveProbe(p kubecontainer.ProbeResult) {
	r.mu.Lock()
	r.probes = append(r.probes, p)
	r.mu.Unlock()
}

// Why the status probes stay beside the status pass: a notready sandbox
// whose status call hangs, in a pod that does not change, is not inspected
// by the kubelet (nor by the pass) until the pod changes, and then it costs
// every relist the deadline. The probes find it before that; the pass, on
// a real CRI client, makes no call for it until the pod changes.
func TestProbesSeeWhatThePassDoesNot(t *testing.T) {
	srv, err := fakecri.Start(filepath.Join(t.TempDir(), "cri.sock"), fakecri.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	sbs, cts := fakecri.Generate(fakecri.Spec{Ready: 2, NotReady: 1, Running: 3, Exited: 3})
	srv.SetPopulation(sbs, cts)
	dead := sbs[2]
	srv.HangStatus(dead.Id)
	c, err := cri.New(cri.Config{Endpoint: srv.Endpoint(), MaxRecvBytes: 256 << 20, Timeout: 2 * time.Second, ProbeMax: 10, ProbeTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	obs := &probeRecorder{}
	r := pleg.NewRelister(c, pleg.Config{Interval: time.Second, LimitBytes: 16 << 20, Probes: true, Status: true}, obs, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	for range 3 {
		r.RelistOnce(ctx)
		for r.Probing() {
			time.Sleep(5 * time.Millisecond)
		}
	}
	timedOut := 0
	for _, p := range obs.probes {
		if p.ID == dead.Id && p.TimedOut {
			timedOut++
		}
	}
	st := r.State()
	if timedOut == 0 {
		t.Errorf("the probes never saw the hung sandbox: %+v", obs.probes)
	}
	if n := st.Status.Calls[kubecontainer.RPCPodSandboxStatus]; n != 0 || st.Status.Passes != 3 {
		t.Errorf("the pass made %d PodSandboxStatus calls in %d passes without a change", n, st.Status.Passes)
	}
	// The pod changes (its container exits): now the pass, like the
	// kubelet, waits on the hung call and the pod is to be reinspected.
	for _, ct := range cts {
		if ct.PodSandboxId == dead.Id {
			ct.State = runtimeapi.ContainerState_CONTAINER_EXITED
		}
	}
	srv.SetPopulation(sbs, cts)
	r.RelistOnce(ctx)
	st = r.State()
	if f, ok := st.Status.Reinspect[dead.Metadata.Uid]; !ok || f.Call.ID != dead.Id || f.Code != "DeadlineExceeded" {
		t.Errorf("after the change: reinspect %+v", st.Status.Reinspect)
	}
	if st.Status.Last.Duration < 2*time.Second {
		t.Errorf("the pass took %s, want the call's deadline", st.Status.Last.Duration)
	}
}
