package collector

import (
	"context"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// LatencyBuckets reach past the kubelet's 180 s threshold so a relist that
// hangs until its deadline lands in a finite bucket, unlike the kubelet's own
// histogram whose largest finite bucket is 10 s.
var LatencyBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 180, 300}

const infoTimeout = 5 * time.Second

// RelisterConfig holds what the loop needs to know about the kubelet it
// imitates.
type RelisterConfig struct {
	Interval time.Duration // time between the end of one relist and the start of the next
	// Threshold is the kubelet's PLEG threshold (3m); exported so alerts can
	// compare against it.
	Threshold time.Duration
	// LimitBytes is the kubelet's gRPC receive limit (16 MiB).
	LimitBytes int64
	// Probes turns on the status probes of suspect sandboxes and containers
	// when the runtime supports them (collector.Prober).
	Probes bool
	// RelistGCPercent, when > 0, is the GC percent in force while a relist
	// holds its answers, restored afterwards. A lower value keeps the peak
	// heap near the one large answer; scrapes between relists keep the
	// process's setting, so their small allocations do not trigger a
	// collection every few scrapes. It is ignored when the process's setting
	// is already lower, or off.
	RelistGCPercent int
}

// Relister runs shadow relists in the background and keeps the latest
// aggregates. Everything a scrape reads comes from here; nothing it does
// reaches the runtime.
type Relister struct {
	rt     Runtime
	cfg    RelisterConfig
	logger *slog.Logger
	now    func() time.Time

	latency       prometheus.Histogram
	probeLatency  *prometheus.HistogramVec
	probeTimeouts *prometheus.CounterVec
	probing       atomic.Bool
	// probeWarned maps a suspect's id to when its hanging status call was
	// last logged; only the probing goroutine (one at a time) touches it.
	probeWarned map[string]time.Time

	mu          sync.RWMutex
	last        *Snapshot // latest finished relist
	counted     *Snapshot // latest relist with exact counts
	lastSeen    time.Time // start of the latest relist the kubelet would have accepted
	info        Info
	infoKnown   bool
	relists     uint64
	errors      map[string]uint64
	lastState   string // "" = ok, otherwise error code; for logging on change only
	firstRelist chan struct{}
}

// NewRelister prepares a relister; call Run to start it.
func NewRelister(rt Runtime, cfg RelisterConfig, logger *slog.Logger) *Relister {
	if p := cfg.RelistGCPercent; p > 0 {
		// Go has no getter: read the process's setting by setting it, once,
		// while the heap is still small.
		base := debug.SetGCPercent(p)
		debug.SetGCPercent(base)
		if base < p {
			cfg.RelistGCPercent = 0 // never raise a lower setting, nor turn GC on
		}
	}
	return &Relister{
		rt:     rt,
		cfg:    cfg,
		logger: logger,
		now:    time.Now,
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pleg_relist_latency_seconds",
			Help:    "Distribution of shadow relist durations (both unfiltered list calls), failed relists included, as the kubelet's kubelet_pleg_relist_duration_seconds but with buckets past the 180 s threshold.",
			Buckets: LatencyBuckets,
		}),
		probeLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pleg_status_probe_duration_seconds",
			Help:    "Latency of the exporter's status calls (PodSandboxStatus, ContainerStatus) on notready sandboxes and unknown containers, the per-pod calls that hang on broken sandboxes and make one kubelet relist take minutes.",
			Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 2.5, 5, 10, 30},
		}, []string{"kind"}),
		probeTimeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pleg_status_probe_timeouts_total",
			Help: "Status probes that ran into their deadline (--probe.timeout): each such call costs the kubelet's relist up to its 2m runtime-request-timeout.",
		}, []string{"kind"}),
		// Present from the start so increase() sees the first failure.
		errors:      map[string]uint64{"ResourceExhausted": 0, "DeadlineExceeded": 0, "Unavailable": 0},
		lastState:   "init",
		firstRelist: make(chan struct{}),
		probeWarned: map[string]time.Time{},
	}
}

// probeWarnEvery is how often one suspect whose status call keeps timing out
// is logged again: a Dead sandbox hangs on every cycle until someone removes
// it, and the counter and the alert say so in the meantime.
const probeWarnEvery = time.Hour

// Run relists until ctx is done. Like the kubelet's wait.Until(relist, 1s)
// the interval is measured from the end of one relist to the start of the
// next, so relists never overlap and a slow runtime is not piled on.
func (r *Relister) Run(ctx context.Context) {
	r.mu.Lock()
	if r.lastSeen.IsZero() {
		// Before the first successful relist the age counts from start-up,
		// so a runtime that is never reachable still raises the stall alert.
		r.lastSeen = r.now()
	}
	r.mu.Unlock()
	first := true
	for {
		r.RelistOnce(ctx)
		if first {
			close(r.firstRelist)
			first = false
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.cfg.Interval):
		}
	}
}

// FirstRelistDone is closed when the first relist has finished.
func (r *Relister) FirstRelistDone() <-chan struct{} { return r.firstRelist }

// RelistOnce performs one relist and records it.
func (r *Relister) RelistOnce(ctx context.Context) {
	r.mu.RLock()
	needInfo := !r.infoKnown
	r.mu.RUnlock()

	if needInfo {
		// Ask who the runtime is only after (re)connecting, not every relist,
		// and on a short deadline of its own so a hung runtime does not eat
		// into the relist's.
		ictx, icancel := context.WithTimeout(ctx, infoTimeout)
		if info, err := r.rt.Info(ictx); err == nil {
			r.mu.Lock()
			r.info, r.infoKnown = info, true
			r.mu.Unlock()
		}
		icancel()
	}
	// Each call of the relist carries its own deadline (--relist.timeout),
	// like each CRI call of the kubelet's.
	snap := r.relist(ctx)
	if ctx.Err() != nil {
		// Shutting down: a relist cut short by us says nothing about the
		// runtime, and must not be logged or counted as its failure.
		return
	}
	if snap.Err == nil {
		// The kubelet also rejects what it cannot receive (for Docker the
		// estimate stands in for cri-dockerd's answer).
		for _, name := range []string{RPCListPodSandbox, RPCListContainers} {
			if rpc := snap.RPCs[name]; rpc.PayloadKnown && rpc.PayloadBytes > r.cfg.LimitBytes {
				snap.Err = &PayloadTooLargeError{RPC: name, Size: rpc.PayloadBytes, Limit: r.cfg.LimitBytes}
				break
			}
		}
	}
	r.record(snap)
	r.startProbes(ctx)
	// A large answer leaves tens of MiB of freed receive buffers behind;
	// hand them back to the OS now rather than minutes later, so the
	// exporter's RSS on a troubled node stays flat between relists.
	if biggest(snap) > releaseAfterBytes {
		// Twice: gRPC pools its receive buffers, and a pooled buffer
		// survives the first collection in the pool's victim cache.
		debug.FreeOSMemory()
		debug.FreeOSMemory()
	}
}

func (r *Relister) relist(ctx context.Context) *Snapshot {
	if p := r.cfg.RelistGCPercent; p > 0 {
		// SetGCPercent takes the heap lock, not the world: cheap enough to
		// do twice a relist.
		defer debug.SetGCPercent(debug.SetGCPercent(p))
	}
	return r.rt.Relist(ctx)
}

// releaseAfterBytes is the answer size past which a relist returns its
// memory to the OS at once.
const releaseAfterBytes = 4 << 20

func biggest(s *Snapshot) int64 {
	var n int64
	for _, rpc := range s.RPCs {
		n = max(n, rpc.PayloadBytes)
	}
	return n
}

func (r *Relister) record(snap *Snapshot) {
	r.latency.Observe(snap.Duration.Seconds())
	code := ErrorCode(snap.Err)

	r.mu.Lock()
	r.relists++
	r.last = snap
	if snap.Counted {
		r.counted = snap
	}
	if snap.Err == nil {
		r.lastSeen = snap.Start
	} else {
		r.errors[code]++
	}
	if code != "" && !snap.Counted {
		// The runtime may have restarted into another version.
		r.infoKnown = false
	}
	prev := r.lastState
	r.lastState = code
	r.mu.Unlock()

	if prev == code {
		return
	}
	switch {
	case code == "":
		r.logger.Info("relist succeeded", "duration", snap.Duration, "containers", sum(snap.Containers), "sandboxes", sum(snap.Sandboxes))
	case snap.Counted:
		r.logger.Warn("relist would fail for the kubelet; counts taken through the fallback", "code", code, "err", snap.Err, "fallback", snap.Fallback)
	default:
		r.logger.Error("relist failed", "code", code, "err", snap.Err)
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// State is a consistent read of the relister for one scrape.
type State struct {
	Last      *Snapshot // nil before the first relist finished
	Counted   *Snapshot // nil until a relist produced counts
	LastSeen  time.Time
	Now       time.Time
	Info      Info
	InfoKnown bool
	Relists   uint64
	Errors    map[string]uint64
}

// State returns a copy of what a scrape needs.
func (r *Relister) State() State {
	r.mu.RLock()
	defer r.mu.RUnlock()
	errs := make(map[string]uint64, len(r.errors))
	for k, v := range r.errors {
		errs[k] = v
	}
	return State{
		Last: r.last, Counted: r.counted, LastSeen: r.lastSeen, Now: r.now(),
		Info: r.info, InfoKnown: r.infoKnown, Relists: r.relists, Errors: errs,
	}
}

// startProbes runs the status probes of the latest relist's suspects in
// their own goroutine, one round at a time: a probe that hangs until its
// deadline must not delay the next relist.
func (r *Relister) startProbes(ctx context.Context) {
	p, ok := r.rt.(Prober)
	if !ok || !r.cfg.Probes || !r.probing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer r.probing.Store(false)
		now := r.now()
		for _, res := range p.Probe(ctx) {
			r.probeLatency.WithLabelValues(res.Kind).Observe(res.Duration.Seconds())
			if !res.TimedOut {
				if _, hung := r.probeWarned[res.ID]; hung {
					delete(r.probeWarned, res.ID)
					r.logger.Info("status probe answers again", "kind", res.Kind, "id", res.ID, "after", res.Duration)
				}
				continue
			}
			r.probeTimeouts.WithLabelValues(res.Kind).Inc()
			// Once per suspect, then once per probeWarnEvery while it
			// keeps hanging: not once per cycle.
			if last, ok := r.probeWarned[res.ID]; !ok || now.Sub(last) >= probeWarnEvery {
				r.probeWarned[res.ID] = now
				r.logger.Warn("status probe timed out", "kind", res.Kind, "id", res.ID, "after", res.Duration)
			}
		}
		// Forget suspects that have not hung for a while (removed, or no
		// longer probed), so the map holds at most an hour's worth.
		for id, last := range r.probeWarned {
			if now.Sub(last) >= probeWarnEvery {
				delete(r.probeWarned, id)
			}
		}
	}()
}
