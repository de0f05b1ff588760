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

package collector

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pleg-exporter/pleg_exporter/pleg"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer/kubecontainertest"
)

// clock is a fake clock safe to read from the relist loop and a scrape.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// hangingInspector inspects pod "ok" in 4 calls of 5 ms and hangs in the
// PodSandboxStatus of pod "stuck" until released, then fails it with
// DeadlineExceeded.
type hangingInspector struct {
	kubecontainertest.Runtime
	clock   *clock
	hanging chan struct{} // closed when the hung call is in flight
	release chan struct{}
}

func (s *hangingInspector) Relist(ctx context.Context) *Snapshot {
	snap := *s.Runtime.Relist(ctx)
	return &snap
}

func (s *hangingInspector) InspectPod(_ context.Context, uid string, track kubecontainer.CallTracker) kubecontainer.PodInspection {
	in := kubecontainer.PodInspection{UID: uid, Namespace: "default", Name: "web-" + uid, Start: s.clock.now()}
	for _, rpc := range kubecontainer.StatusRPCs {
		track.Begin(rpc, "id")
		sc := kubecontainer.StatusCall{RPC: rpc, ID: "id", Start: s.clock.now()}
		if uid == "stuck" && rpc == kubecontainer.RPCPodSandboxStatus {
			close(s.hanging)
			<-s.release
			sc.Err = status.Error(codes.DeadlineExceeded, "context deadline exceeded")
		} else {
			s.clock.add(5 * time.Millisecond)
		}
		sc.Duration = s.clock.now().Sub(sc.Start)
		track.End(sc)
		if sc.Err != nil {
			in.Err, in.Failed = sc.Err, sc
			break
		}
	}
	in.Duration = s.clock.now().Sub(in.Start)
	return in
}

func newStatusRelister(rt Runtime, clk *clock) (*pleg.Relister, *prometheus.Registry) {
	c := New(Config{Threshold: 3 * time.Minute, LimitBytes: 16777216, Status: true, Now: clk.now})
	r := pleg.NewRelister(rt, pleg.Config{Interval: 10 * time.Second, LimitBytes: 16777216, Status: true, Now: clk.now}, c, slogDiscard())
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	return r, reg
}

// While a status call hangs, a scrape shows it in flight with its age and
// the kubelet's age growing with it; after its deadline, the failed pod is
// counted and pending reinspection.
func TestGoldenStatusPass(t *testing.T) {
	clk := &clock{t: t0}
	snap := healthySnap(t0)
	snap.ChangesKnown, snap.PodUIDs = true, []string{"ok", "stuck"}
	rt := &hangingInspector{Runtime: kubecontainertest.Runtime{Snaps: []*Snapshot{snap},
		RuntimeInfo: Info{Runtime: "containerd", Version: "1.7.24", APIVersion: "v1", Streaming: "false"}},
		clock: clk, hanging: make(chan struct{}), release: make(chan struct{})}
	r, reg := newStatusRelister(rt, clk)
	done := make(chan struct{})
	go func() {
		r.RelistOnce(context.Background())
		close(done)
	}()
	<-rt.hanging
	clk.add(90 * time.Second)
	compareGolden(t, reg, "metrics-status-hung.prom")
	clk.add(30 * time.Second)
	close(rt.release)
	<-done
	clk.add(2 * time.Second)
	compareGolden(t, reg, "metrics-status-failed.prom")
}
