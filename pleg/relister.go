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

package pleg

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

const infoTimeout = 5 * time.Second

// Config holds what the loop needs to know about the kubelet it imitates.
type Config struct {
	Interval time.Duration // time between the end of one relist and the start of the next
	// LimitBytes is the kubelet's gRPC receive limit (16 MiB): a relist
	// whose answer is larger is one the kubelet would have failed.
	LimitBytes int64
	// Probes turns on the status probes of suspect sandboxes and containers
	// when the runtime supports them (kubecontainer.Prober).
	Probes bool
	// Status turns on the status pass when the runtime can inspect pods
	// (kubecontainer.PodInspector): the kubelet's GetPodStatus of each
	// changed pod after the lists (status.go).
	Status bool
	// StatusStartupPods is how many pods that were already there when the
	// exporter started one pass inspects besides the changed ones; 0: such
	// pods are inspected only when they change.
	StatusStartupPods int
	// StatusStartupTimeout bounds the inspection of such a pod, and the
	// reinspection of one that failed until it changes (--probe.timeout).
	StatusStartupTimeout time.Duration
	// StatusMaxDuration ends a pass between two pods once it has run this
	// long (the kubelet's threshold); 0: never.
	StatusMaxDuration time.Duration
	// TuneMemory lowers the GC percent while a relist holds its answer and
	// returns the memory of a large one at once (memory.go).
	TuneMemory bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Observer is told what the relister does. The Prometheus collector is one.
// Its methods are called from the relist loop and the probe goroutine and
// must not block.
type Observer interface {
	// Observe receives a copy of the relister's state when the relister is
	// created, when it has learnt who the runtime is, and after every
	// relist; State.Last is the latest finished relist (nil before the
	// first) and State.Relists counts them.
	Observe(State)
	// ObserveProbe receives the result of each status probe.
	ObserveProbe(kubecontainer.ProbeResult)
}

// Relister runs shadow relists in the background and keeps the latest
// aggregates. Everything a scrape reads comes from here; nothing it does
// reaches the runtime.
type Relister struct {
	rt     kubecontainer.Runtime
	cfg    Config
	obs    Observer
	logger *slog.Logger
	now    func() time.Time
	memory memoryTuning

	probing atomic.Bool
	// probeWarned maps a suspect's id to when its hanging status call was
	// last logged; only the probing goroutine (one at a time) touches it.
	probeWarned map[string]time.Time

	mu          sync.RWMutex
	last        *kubecontainer.Snapshot // latest finished relist
	counted     *kubecontainer.Snapshot // latest relist with exact counts
	lastSeen    time.Time               // start of the latest relist the kubelet would have accepted
	streamSeen  time.Time               // the same for a kubelet that streams lists
	listing     time.Time               // start of the relist's list calls under way; zero between them
	info        kubecontainer.Info
	infoKnown   bool
	relists     uint64
	errors      map[string]uint64
	lastState   string // "" = ok, otherwise error code; for logging on change only
	lastDocker  string // the same for the Docker view of cri-dockerd nodes
	firstRelist chan struct{}
	firstOnce   sync.Once

	status        statusPass
	startupListed bool // the first complete relist's pods were taken as the start-up backlog
}

// NewRelister prepares a relister; call Run to start it. Until the first
// successful relist the kubelet's age counts from now, so a runtime that is
// never reachable still raises the stall alert. obs may be nil.
func NewRelister(rt kubecontainer.Runtime, cfg Config, obs Observer, logger *slog.Logger) *Relister {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if obs == nil {
		obs = nopObserver{}
	}
	r := &Relister{
		rt:     rt,
		cfg:    cfg,
		obs:    obs,
		logger: logger,
		now:    cfg.Now,
		memory: newMemoryTuning(cfg.TuneMemory),
		// Present from the start so increase() sees the first failure.
		errors:      map[string]uint64{kubecontainer.CodeResourceExhausted: 0, kubecontainer.CodeDeadlineExceeded: 0, kubecontainer.CodeUnavailable: 0},
		lastState:   "init",
		firstRelist: make(chan struct{}),
		probeWarned: map[string]time.Time{},
		status:      newStatusPass(),
	}
	r.lastSeen = r.now()
	r.streamSeen = r.lastSeen
	obs.Observe(r.State())
	return r
}

type nopObserver struct{}

func (nopObserver) Observe(State)                          {}
func (nopObserver) ObserveProbe(kubecontainer.ProbeResult) {}

// probeWarnEvery is how often one suspect whose status call keeps timing out
// is logged again: a Dead sandbox hangs on every cycle until someone removes
// it, and the counter and the alert say so in the meantime.
const probeWarnEvery = time.Hour

// Run relists until ctx is done. Like the kubelet's wait.Until(relist, 1s)
// the interval is measured from the end of one relist to the start of the
// next, so relists never overlap and a slow runtime is not piled on.
func (r *Relister) Run(ctx context.Context) {
	defer r.relisted() // also when the first relist was cut short
	for {
		r.RelistOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.nextPause()):
		}
	}
}

// kubeletPeriod is the kubelet's relist period (genericPlegRelistPeriod).
const kubeletPeriod = time.Second

// nextPause is the pause before the next relist: the interval, except
// while pods the kubelet must also be reinspecting failed their last
// inspection. Then, like the kubelet, the next relist follows the pass
// after its 1s period, so that pleg_last_seen_seconds keeps its age
// (G + U + 1s + G) instead of lagging an interval more at every cycle; the
// calls that hang bound the rate by themselves.
func (r *Relister) nextPause() time.Duration {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, f := range r.status.failures {
		if !f.Unchanged {
			return min(r.cfg.Interval, kubeletPeriod)
		}
	}
	return r.cfg.Interval
}

// FirstRelistDone is closed when the first relist's lists have finished,
// before its status pass: readiness waits for the lists, not for the pods.
func (r *Relister) FirstRelistDone() <-chan struct{} { return r.firstRelist }

func (r *Relister) relisted() { r.firstOnce.Do(func() { close(r.firstRelist) }) }

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
			// Known now, not only after a relist that may hang for minutes.
			r.obs.Observe(r.State())
		}
		icancel()
	}
	// Each call of the relist carries its own deadline (--relist.timeout),
	// like each CRI call of the kubelet's.
	restore := r.memory.during()
	r.setListing(r.now())
	snap := r.rt.Relist(ctx)
	r.setListing(time.Time{})
	restore()
	if ctx.Err() != nil {
		// Shutting down: a relist cut short by us says nothing about the
		// runtime, and must not be logged or counted as its failure.
		return
	}
	if snap.Err == nil {
		// The kubelet also rejects what it cannot receive (for Docker the
		// estimate stands in for cri-dockerd's answer).
		for _, name := range []string{kubecontainer.RPCListPodSandbox, kubecontainer.RPCListContainers} {
			if rpc := snap.RPCs[name]; rpc.PayloadKnown && rpc.PayloadBytes > r.cfg.LimitBytes {
				snap.Err = &kubecontainer.PayloadTooLargeError{RPC: name, Size: rpc.PayloadBytes, Limit: r.cfg.LimitBytes}
				break
			}
		}
	}
	pods := snap.PodUIDs
	snap.PodUIDs = nil // the snapshot kept holds no pod
	r.record(snap)
	r.relisted()
	r.startProbes(ctx)
	r.memory.after(biggest(snap))
	// Like the kubelet's, only a relist whose lists it would have
	// accepted goes on to inspect pods; and the next relist starts when
	// the pass ends.
	if in, ok := r.rt.(kubecontainer.PodInspector); ok && r.cfg.Status && (snap.Err == nil || snap.StreamAccepted) {
		r.inspectPods(ctx, in, snap, pods)
	}
}

// setListing records when the list calls under way began (zero: none) and
// tells the observer, so a scrape sees a hung list from its first second.
func (r *Relister) setListing(at time.Time) {
	r.mu.Lock()
	r.listing = at
	r.mu.Unlock()
	r.obs.Observe(r.State())
}

func biggest(s *kubecontainer.Snapshot) int64 {
	var n int64
	for _, rpc := range s.RPCs {
		n = max(n, rpc.PayloadBytes)
	}
	return n
}

func (r *Relister) record(snap *kubecontainer.Snapshot) {
	code := kubecontainer.ErrorCode(snap.Err)

	r.mu.Lock()
	r.relists++
	r.last = snap
	if snap.Counted {
		r.counted = snap
	}
	if snap.Err == nil || snap.StreamAccepted {
		r.streamSeen = snap.Start
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
	dockerCode := kubecontainer.ErrorCode(snap.DockerErr)
	prevDocker := r.lastDocker
	r.lastDocker = dockerCode
	r.mu.Unlock()
	r.obs.Observe(r.State())

	// The Docker view (cri-dockerd nodes) is not the kubelet's relist: its
	// failure is logged, and pleg_docker_up says it, but it is not a relist
	// error.
	if dockerCode != prevDocker {
		if dockerCode != "" {
			r.logger.Warn("docker view failed; pleg_docker_containers is missing until it is back", "code", dockerCode, "err", snap.DockerErr)
		} else if prevDocker != "" {
			r.logger.Info("docker view is back")
		}
	}
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

// State is a consistent read of the relister.
type State struct {
	Last     *kubecontainer.Snapshot // nil before the first relist finished
	Counted  *kubecontainer.Snapshot // nil until a relist produced counts
	LastSeen time.Time
	// StreamLastSeen is LastSeen for a kubelet that streams lists.
	StreamLastSeen time.Time
	// ListingSince is when the list calls under way began; zero between
	// them.
	ListingSince time.Time
	Info         kubecontainer.Info
	InfoKnown    bool
	Relists      uint64
	Errors       map[string]uint64
	// Status is what the status passes did.
	Status StatusState
}

// State returns a copy of the relister's state.
func (r *Relister) State() State {
	r.mu.RLock()
	defer r.mu.RUnlock()
	errs := make(map[string]uint64, len(r.errors))
	for k, v := range r.errors {
		errs[k] = v
	}
	return State{
		Last: r.last, Counted: r.counted, LastSeen: r.lastSeen, StreamLastSeen: r.streamSeen, ListingSince: r.listing,
		Info: r.info, InfoKnown: r.infoKnown, Relists: r.relists, Errors: errs,
		Status: r.copyStatus(),
	}
}

// startProbes runs the status probes of the latest relist's suspects in
// their own goroutine, one round at a time: a probe that hangs until its
// deadline must not delay the next relist.
func (r *Relister) startProbes(ctx context.Context) {
	p, ok := r.rt.(kubecontainer.Prober)
	if !ok || !r.cfg.Probes || !r.probing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer r.probing.Store(false)
		now := r.now()
		for _, res := range p.Probe(ctx) {
			r.obs.ObserveProbe(res)
			if !res.TimedOut {
				if _, hung := r.probeWarned[res.ID]; hung {
					delete(r.probeWarned, res.ID)
					r.logger.Info("status probe answers again", "kind", res.Kind, "id", res.ID, "after", res.Duration)
				}
				continue
			}
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

// Probing reports whether a round of status probes is under way.
func (r *Relister) Probing() bool { return r.probing.Load() }
