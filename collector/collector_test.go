package collector

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// stubRuntime returns prepared snapshots, one per relist.
type stubRuntime struct {
	snaps []*Snapshot
	info  Info
	n     int
}

func (s *stubRuntime) Relist(context.Context) *Snapshot {
	snap := s.snaps[min(s.n, len(s.snaps)-1)]
	s.n++
	return snap
}
func (s *stubRuntime) Info(context.Context) (Info, error) { return s.info, nil }
func (s *stubRuntime) Close() error                       { return nil }

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

func newTestRelister(rt Runtime, now *time.Time) *Relister {
	r := NewRelister(rt, RelisterConfig{Interval: 10 * time.Second, Threshold: 3 * time.Minute, LimitBytes: 16777216}, slogDiscard())
	r.now = func() time.Time { return *now }
	return r
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
	rt := &stubRuntime{snaps: []*Snapshot{healthySnap(t0)}, info: Info{Runtime: "containerd", Version: "1.7.24", APIVersion: "v1", Streaming: "false"}}
	r := newTestRelister(rt, &now)
	r.RelistOnce(context.Background())
	now = t0.Add(4500 * time.Millisecond)
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(r))
	compareGolden(t, reg, "metrics-healthy.prom")
}

// After a good relist the answer outgrows the limit: the kubelet's age
// grows while the fallback still reports exact counts.
func TestGoldenOverflow(t *testing.T) {
	now := t0
	rt := &stubRuntime{
		snaps: []*Snapshot{healthySnap(t0), overflowSnap(t0.Add(10 * time.Second)), overflowSnap(t0.Add(22 * time.Second))},
		info:  Info{Runtime: "containerd", Version: "1.7.24", APIVersion: "v1", Streaming: "false"},
	}
	r := newTestRelister(rt, &now)
	for i := 0; i < 3; i++ {
		r.RelistOnce(context.Background())
	}
	now = t0.Add(95 * time.Second)
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(r))
	compareGolden(t, reg, "metrics-overflow.prom")
	if got := testutil.ToFloat64(gaugeOf(t, reg, "pleg_last_seen_seconds")); got != 95 {
		t.Errorf("last seen = %v, want 95 (since the last good relist's start)", got)
	}
}

// A runtime that never answered: up 0, no counts, age from start-up.
func TestGoldenRuntimeDown(t *testing.T) {
	now := t0
	down := NewSnapshot(t0)
	down.Err = status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial unix /run/containerd/containerd.sock: connect: no such file or directory"`)
	rt := &stubRuntime{snaps: []*Snapshot{down}}
	r := newTestRelister(rt, &now)
	r.lastSeen = t0.Add(-2 * time.Second) // exporter start
	r.RelistOnce(context.Background())
	now = t0.Add(40 * time.Second)
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(r))
	compareGolden(t, reg, "metrics-runtime-down.prom")
}

// A runtime that sends more than the kubelet can receive (no send cap on
// its side) is a kubelet failure even though we received it.
func TestPayloadOverLimitReceivedCountsAsFailure(t *testing.T) {
	now := t0
	s := healthySnap(t0)
	s.RPCs[RPCListContainers] = RPCStat{PayloadBytes: 20 << 20, PayloadKnown: true}
	r := newTestRelister(&stubRuntime{snaps: []*Snapshot{s}}, &now)
	r.lastSeen = t0.Add(-time.Minute)
	r.RelistOnce(context.Background())
	st := r.State()
	if !errors.Is(st.Last.Err, ErrPayloadTooLarge) || st.Errors["ResourceExhausted"] != 1 {
		t.Fatalf("err = %v, errors = %v", st.Last.Err, st.Errors)
	}
	if !st.LastSeen.Equal(t0.Add(-time.Minute)) {
		t.Errorf("last seen moved to %v", st.LastSeen)
	}
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

func TestParseMessageSize(t *testing.T) {
	for msg, want := range map[string][2]int64{
		"grpc: trying to send message larger than max (16783506 vs. 16777216)":                                    {16783506, 16777216},
		"rpc error: code = ResourceExhausted desc = grpc: received message larger than max (4195017 vs. 4194304)": {4195017, 4194304},
	} {
		size, limit, ok := ParseMessageSize(msg)
		if !ok || size != want[0] || limit != want[1] {
			t.Errorf("%q: %d %d %v", msg, size, limit, ok)
		}
	}
	for _, msg := range []string{"", "larger than max", "message larger than max (abc vs. 1)", "message larger than max (99999999999999999999 vs. 1)"} {
		if _, _, ok := ParseMessageSize(msg); ok {
			t.Errorf("%q parsed", msg)
		}
	}
}

func FuzzParseMessageSize(f *testing.F) {
	f.Add("grpc: trying to send message larger than max (16783506 vs. 16777216)")
	f.Add("message larger than max (1 vs. 2)")
	f.Add("")
	f.Fuzz(func(t *testing.T, msg string) {
		size, limit, ok := ParseMessageSize(msg)
		if ok && (size < 0 || limit < 0) {
			t.Errorf("negative sizes from %q", msg)
		}
		if !ok && (size != 0 || limit != 0) {
			t.Errorf("sizes without ok from %q", msg)
		}
	})
}

// A cri-dockerd node: CRI counts plus Docker's own states.
func TestGoldenDockerView(t *testing.T) {
	now := t0
	s := healthySnap(t0)
	s.DockerContainers = map[string]int{"created": 1, "running": 120, "paused": 0, "restarting": 1, "removing": 0, "exited": 10400, "dead": 1}
	rt := &stubRuntime{snaps: []*Snapshot{s}, info: Info{Runtime: "docker", Version: "0.4.3", APIVersion: "v1", Streaming: "false"}}
	r := newTestRelister(rt, &now)
	r.RelistOnce(context.Background())
	now = t0.Add(time.Second)
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(r))
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
			r := newTestRelister(&stubRuntime{snaps: []*Snapshot{s}}, &now)
			r.RelistOnce(context.Background())
			reg := prometheus.NewRegistry()
			reg.MustRegister(NewCollector(r))
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
	stubRuntime
	results []ProbeResult
}

func (p *probingRuntime) Probe(context.Context) []ProbeResult { return p.results }

// --collector.namespaces and the status probes.
func TestGoldenNamespacesAndProbes(t *testing.T) {
	now := t0
	s := healthySnap(t0)
	tally := NamespaceTally{}
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
	rt := &probingRuntime{stubRuntime: stubRuntime{snaps: []*Snapshot{s}, info: Info{Runtime: "containerd", Version: "1.7.24", APIVersion: "v1", Streaming: "false"}},
		results: []ProbeResult{
			{Kind: ProbeSandbox, ID: "a1", Duration: 5 * time.Second, TimedOut: true},
			{Kind: ProbeSandbox, ID: "a2", Duration: 3 * time.Millisecond},
			{Kind: ProbeContainer, ID: "c1", Duration: 2 * time.Millisecond},
		}}
	r := NewRelister(rt, RelisterConfig{Interval: 10 * time.Second, Threshold: 3 * time.Minute, LimitBytes: 16777216, Probes: true}, slogDiscard())
	r.now = func() time.Time { return now }
	r.RelistOnce(context.Background())
	for r.probing.Load() {
		time.Sleep(time.Millisecond)
	}
	now = t0.Add(2 * time.Second)
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(r))
	compareGolden(t, reg, "metrics-namespaces-probes.prom")
}

// gcPercentRuntime records the GC percent in force while it relists.
type gcPercentRuntime struct {
	stubRuntime
	during int
}

func currentGCPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

func (g *gcPercentRuntime) Relist(ctx context.Context) *Snapshot {
	g.during = currentGCPercent()
	return g.stubRuntime.Relist(ctx)
}

// A relist holds its answer with the lower GC percent; scrapes between
// relists run with the process's own, and a lower process setting (or
// GOGC=off) is never raised.
func TestRelistGCPercentIsScopedToTheRelist(t *testing.T) {
	orig := debug.SetGCPercent(100)
	defer debug.SetGCPercent(orig)
	for _, tc := range []struct{ process, want int }{{100, 50}, {200, 50}, {20, 20}, {-1, -1}} {
		debug.SetGCPercent(tc.process)
		now := t0
		rt := &gcPercentRuntime{stubRuntime: stubRuntime{snaps: []*Snapshot{healthySnap(t0)}}}
		r := NewRelister(rt, RelisterConfig{Interval: time.Second, Threshold: 3 * time.Minute, LimitBytes: 16777216, RelistGCPercent: 50}, slogDiscard())
		r.now = func() time.Time { return now }
		r.RelistOnce(context.Background())
		after := currentGCPercent()
		debug.SetGCPercent(100)
		if rt.during != tc.want || after != tc.process {
			t.Errorf("process GOGC %d: %d during the relist (want %d), %d after (want %d)", tc.process, rt.during, tc.want, after, tc.process)
		}
	}
}

// On shutdown the relist in flight is cancelled by the exporter itself: it
// is neither counted as a relist the kubelet would fail nor recorded.
func TestRelistCancelledByShutdownIsNotRecorded(t *testing.T) {
	now := t0
	cancelled := NewSnapshot(t0)
	cancelled.Err = status.Error(codes.Canceled, "context canceled")
	r := newTestRelister(&stubRuntime{snaps: []*Snapshot{healthySnap(t0), cancelled}}, &now)
	r.RelistOnce(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r.RelistOnce(ctx)
	st := r.State()
	if st.Relists != 1 || st.Errors["Canceled"] != 0 || st.Last.Err != nil {
		t.Fatalf("after a cancelled relist: relists %d, errors %v, last err %v; want 1 relist, no error", st.Relists, st.Errors, st.Last.Err)
	}
}

// A sandbox whose status call hangs on every cycle is logged once, again
// after probeWarnEvery, and once more when it answers; the counter counts
// every timeout.
func TestHangingProbeIsLoggedOncePerHour(t *testing.T) {
	now := t0
	hung := ProbeResult{Kind: ProbeSandbox, ID: "s-dead", Duration: 5 * time.Second, TimedOut: true}
	rt := &probingRuntime{stubRuntime: stubRuntime{snaps: []*Snapshot{healthySnap(t0)}}, results: []ProbeResult{hung}}
	var logs strings.Builder
	r := NewRelister(rt, RelisterConfig{Interval: 10 * time.Second, Threshold: 3 * time.Minute, LimitBytes: 16777216, Probes: true},
		slog.New(slog.NewTextHandler(&logs, nil)))
	r.now = func() time.Time { return now }
	cycle := func() {
		t.Helper()
		r.RelistOnce(context.Background())
		for r.probing.Load() {
			time.Sleep(time.Millisecond)
		}
		now = now.Add(10 * time.Second)
	}
	count := func(msg string) int { return strings.Count(logs.String(), `msg="`+msg+`"`) }

	for i := 0; i < 30; i++ {
		cycle()
	}
	if n := count("status probe timed out"); n != 1 {
		t.Fatalf("30 cycles of the same hanging sandbox logged %d warnings, want 1:\n%s", n, logs.String())
	}
	now = now.Add(probeWarnEvery)
	cycle()
	if n := count("status probe timed out"); n != 2 {
		t.Fatalf("an hour later: %d warnings, want 2", n)
	}
	rt.results = []ProbeResult{{Kind: ProbeSandbox, ID: "s-dead", Duration: time.Millisecond}}
	cycle()
	cycle()
	if n := count("status probe answers again"); n != 1 {
		t.Fatalf("recovery logged %d times, want 1:\n%s", n, logs.String())
	}
	if got := testutil.ToFloat64(r.probeTimeouts.WithLabelValues(ProbeSandbox)); got != 31 {
		t.Fatalf("pleg_status_probe_timeouts_total = %v, want 31: every timeout counts", got)
	}
}
