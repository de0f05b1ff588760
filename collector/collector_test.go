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
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pleg-exporter/pleg_exporter/pleg"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer/kubecontainertest"
)

// The model's names, unqualified, so the fixtures read like the metrics.
type (
	Snapshot    = kubecontainer.Snapshot
	Info        = kubecontainer.Info
	Runtime     = kubecontainer.Runtime
	RPCStat     = kubecontainer.RPCStat
	ProbeResult = kubecontainer.ProbeResult
)

const (
	RPCListPodSandbox = kubecontainer.RPCListPodSandbox
	RPCListContainers = kubecontainer.RPCListContainers
	ContainerCreated  = kubecontainer.ContainerCreated
	ContainerRunning  = kubecontainer.ContainerRunning
	ContainerExited   = kubecontainer.ContainerExited
	ContainerUnknown  = kubecontainer.ContainerUnknown
	SandboxReady      = kubecontainer.SandboxReady
	SandboxNotReady   = kubecontainer.SandboxNotReady
	ProbeSandbox      = kubecontainer.ProbeSandbox
	ProbeContainer    = kubecontainer.ProbeContainer
)

var NewSnapshot = kubecontainer.NewSnapshot

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

var t0 = time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)

func healthySnap(start time.Time) *Snapshot {
	s := NewSnapshot(start)
	s.Duration = 120 * time.Millisecond
	s.RPCs[RPCListPodSandbox] = RPCStat{Duration: 20 * time.Millisecond, PayloadBytes: 51234, PayloadKnown: true}
	s.RPCs[RPCListContainers] = RPCStat{Duration: 100 * time.Millisecond, PayloadBytes: 9876543, PayloadKnown: true}
	s.Containers = map[string]int{ContainerCreated: 3, ContainerRunning: 120, ContainerExited: 10400, ContainerUnknown: 2}
	s.Sandboxes = map[string]int{SandboxReady: 60, SandboxNotReady: 900}
	s.Counted = true
	return s
}

func overflowSnap(start time.Time) *Snapshot {
	s := healthySnap(start)
	s.Duration = 80 * time.Millisecond
	s.Err = status.Error(codes.ResourceExhausted, "grpc: trying to send message larger than max (16783506 vs. 16777216)")
	s.RPCs[RPCListContainers] = RPCStat{Duration: 60 * time.Millisecond, PayloadBytes: 16783506, PayloadKnown: true, Err: s.Err}
	s.Containers[ContainerExited] = 17800
	s.Fallback = true
	s.FallbackDuration = 2 * time.Second
	return s
}

// newTestRelister wires a relister on rt to a collector, both on the clock
// *now, and returns the relister and a registry with the collector.
func newTestRelister(rt Runtime, now *time.Time, probes bool) (*pleg.Relister, *prometheus.Registry) {
	clock := func() time.Time { return *now }
	c := New(Config{Threshold: 3 * time.Minute, LimitBytes: 16777216, Probes: probes, Now: clock})
	r := pleg.NewRelister(rt, pleg.Config{Interval: 10 * time.Second, LimitBytes: 16777216, Probes: probes, Now: clock}, c, slogDiscard())
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	return r, reg
}

func compareGolden(t *testing.T, reg *prometheus.Registry, name string) {
	t.Helper()
	path := filepath.Join("..", "testdata", name)
	if *update {
		got, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, mf := range got {
			if err := writeText(&b, mf); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := testutil.GatherAndCompare(reg, f); err != nil {
		t.Fatalf("%s: %v\n(run go test ./collector -update to accept)", name, err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestGoldenHealthy(t *testing.T) {
	now := t0
	rt := &kubecontainertest.Runtime{Snaps: []*Snapshot{healthySnap(t0)}, RuntimeInfo: Info{Runtime: "containerd", Version: "1.7.24", APIVersion: "v1", Streaming: "false"}}
	r, reg := newTestRelister(rt, &now, false)
	r.RelistOnce(context.Background())
	now = t0.Add(4500 * time.Millisecond)
	compareGolden(t, reg, "metrics-healthy.prom")
}

// After a good relist the answer outgrows the limit: the kubelet's age
// grows while the fallback still reports exact counts.
func TestGoldenOverflow(t *testing.T) {
	now := t0
	rt := &kubecontainertest.Runtime{
		Snaps:       []*Snapshot{healthySnap(t0), overflowSnap(t0.Add(10 * time.Second)), overflowSnap(t0.Add(22 * time.Second))},
		RuntimeInfo: Info{Runtime: "containerd", Version: "1.7.24", APIVersion: "v1", Streaming: "false"},
	}
	r, reg := newTestRelister(rt, &now, false)
	for i := 0; i < 3; i++ {
		r.RelistOnce(context.Background())
	}
	now = t0.Add(95 * time.Second)
	compareGolden(t, reg, "metrics-overflow.prom")
	if got := testutil.ToFloat64(gaugeOf(t, reg, "pleg_last_seen_seconds")); got != 95 {
		t.Errorf("last seen = %v, want 95 (since the last good relist's start)", got)
	}
}

// containerd 2.4 streams: the whole ListContainers answer is past the limit
// (the runtime refuses to send it), every 5000-container message fits. The
// kubelet's relist succeeds when it streams, so the stream message is what
// the mixin compares on such nodes. Churn accumulates from the second relist.
func TestGoldenStreaming(t *testing.T) {
	now := t0
	first := healthySnap(t0)
	first.RPCs[RPCListPodSandbox] = RPCStat{Duration: 20 * time.Millisecond, PayloadBytes: 51234, PayloadKnown: true, StreamMessageBytes: 51234, StreamKnown: true}
	streamed := func(start time.Time, items, pods int) *Snapshot {
		s := overflowSnap(start)
		s.RPCs[RPCListPodSandbox] = first.RPCs[RPCListPodSandbox]
		st := s.RPCs[RPCListContainers]
		st.StreamMessageBytes, st.StreamKnown = 11711265, true
		s.RPCs[RPCListContainers] = st
		s.ChangedItems, s.ChangedPods, s.ChangesKnown = items, pods, true
		s.StreamAccepted = true
		return s
	}
	rt := &kubecontainertest.Runtime{
		Snaps:       []*Snapshot{first, streamed(t0.Add(10*time.Second), 40, 3), streamed(t0.Add(20*time.Second), 12, 2)},
		RuntimeInfo: Info{Runtime: "containerd", Version: "v2.4.2", APIVersion: "v1", Streaming: "true"},
	}
	r, reg := newTestRelister(rt, &now, false)
	for i := 0; i < 3; i++ {
		r.RelistOnce(context.Background())
	}
	now = t0.Add(25 * time.Second)
	compareGolden(t, reg, "metrics-streaming.prom")
	// A unary kubelet last relisted at the start, a streaming one 5 s ago.
	if got := testutil.ToFloat64(gaugeOf(t, reg, "pleg_last_seen_seconds")); got != 25 {
		t.Errorf("last seen = %v, want 25", got)
	}
	if got := testutil.ToFloat64(gaugeOf(t, reg, "pleg_streaming_last_seen_seconds")); got != 5 {
		t.Errorf("streaming last seen = %v, want 5 (the last streamed relist that fits)", got)
	}
}

// A runtime that never answered: up 0, no counts, age from start-up.
func TestGoldenRuntimeDown(t *testing.T) {
	now := t0.Add(-2 * time.Second) // exporter start
	down := NewSnapshot(t0)
	down.Err = status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial unix /run/containerd/containerd.sock: connect: no such file or directory"`)
	rt := &kubecontainertest.Runtime{Snaps: []*Snapshot{down}}
	r, reg := newTestRelister(rt, &now, false)
	now = t0
	r.RelistOnce(context.Background())
	now = t0.Add(40 * time.Second)
	compareGolden(t, reg, "metrics-runtime-down.prom")
}

func gaugeOf(t *testing.T, g prometheus.Gatherer, name string) prometheus.Collector {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: "copy"}, func() float64 { return mf.GetMetric()[0].GetGauge().GetValue() })
		}
	}
	t.Fatalf("%s not exported", name)
	return nil
}

// A cri-dockerd node: CRI counts plus Docker's own states.
func TestGoldenDockerView(t *testing.T) {
	now := t0
	s := healthySnap(t0)
	s.DockerContainers = map[string]int{"created": 1, "running": 120, "paused": 0, "restarting": 1, "removing": 0, "exited": 10400, "dead": 1}
	rt := &kubecontainertest.Runtime{Snaps: []*Snapshot{s}, RuntimeInfo: Info{Runtime: "docker", Version: "0.4.3", APIVersion: "v1", Streaming: "false"}}
	r, reg := newTestRelister(rt, &now, false)
	r.RelistOnce(context.Background())
	now = t0.Add(time.Second)
	compareGolden(t, reg, "metrics-cri-dockerd.prom")
}

// BenchmarkScrape is one scrape of the product's metrics: a read of the
// latest aggregates, whatever the number of containers behind them.
func BenchmarkScrape(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("containers=%d", n), func(b *testing.B) {
			now := t0
			s := healthySnap(t0)
			s.Containers[ContainerExited] = n
			r, reg := newTestRelister(&kubecontainertest.Runtime{Snaps: []*Snapshot{s}}, &now, false)
			r.RelistOnce(context.Background())
			h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
			req := httptest.NewRequest("GET", "/metrics", nil)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatal(w.Code)
				}
			}
		})
	}
}

type probingRuntime struct {
	kubecontainertest.Runtime
	results []ProbeResult
}

func (p *probingRuntime) Probe(context.Context) []ProbeResult { return p.results }

// --collector.namespaces and the status probes.
func TestGoldenNamespacesAndProbes(t *testing.T) {
	now := t0
	s := healthySnap(t0)
	tally := kubecontainer.NamespaceTally{}
	for i := 0; i < 9000; i++ {
		tally.Add("batch-jobs", ContainerExited, 1000)
	}
	for i := 0; i < 1400; i++ {
		tally.Add("ci", ContainerExited, 900)
	}
	for i := 0; i < 120; i++ {
		tally.Add("default", ContainerRunning, 1200)
	}
	tally.Add("monitoring", ContainerUnknown, 800)
	tally.Add("kube-system", ContainerCreated, 800)
	s.Namespaces = tally.Top(3)
	rt := &probingRuntime{Runtime: kubecontainertest.Runtime{Snaps: []*Snapshot{s}, RuntimeInfo: Info{Runtime: "containerd", Version: "1.7.24", APIVersion: "v1", Streaming: "false"}},
		results: []ProbeResult{
			{Kind: ProbeSandbox, ID: "a1", Duration: 5 * time.Second, TimedOut: true},
			{Kind: ProbeSandbox, ID: "a2", Duration: 3 * time.Millisecond},
			{Kind: ProbeContainer, ID: "c1", Duration: 2 * time.Millisecond},
		}}
	r, reg := newTestRelister(rt, &now, true)
	r.RelistOnce(context.Background())
	for r.Probing() {
		time.Sleep(time.Millisecond)
	}
	now = t0.Add(2 * time.Second)
	compareGolden(t, reg, "metrics-namespaces-probes.prom")
}
