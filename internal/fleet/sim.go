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

// Package fleet simulates a fleet of nodes for Prometheus to scrape: one
// process serving, for each simulated node, the exporter's /metrics and the
// kubelet's, as separate targets. A node's exporter exposition is the
// product's own: each node runs the real relister (package pleg) and the
// real collector over a runtime that replays relists recorded through the
// real CRI client (Record), so every series, label and help text is what a
// node of that size and state exports. Nodes follow scripted lives (Life):
// most healthy, some with payload creeping towards the limit, a few
// overflowing, a few with a frozen runtime, kubelets restarting, exporters
// that stop answering, nodes still on an older exporter.
package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pleg-exporter/pleg_exporter/collector"
	"github.com/pleg-exporter/pleg_exporter/pleg"
)

// Life is what happens to a simulated node.
type Life int

// The lives. Faulty lives page (Overflowing, Frozen), Creeping may warn,
// Gone is only for the up-based alerts, the others must stay quiet.
const (
	Healthy Life = iota
	// Creeping: payload climbing from Recording's first creeping ratio at
	// Config.CreepPerHour.
	Creeping
	// Overflowing: past the limit from Config.FaultAfter on.
	Overflowing
	// Frozen: the runtime stops answering at Config.FaultAfter.
	Frozen
	// KubeletRestarting: the kubelet restarts every Config.KubeletRestartEvery
	// (its target down for Config.KubeletRestartDown, its counters reset).
	KubeletRestarting
	// Gone: the exporter's target stops answering at Config.FaultAfter.
	Gone
	// OldExporter: a healthy node still on exporter 0.1.0 (OldVersion).
	OldExporter
)

var lifeNames = map[Life]string{Healthy: "healthy", Creeping: "creeping", Overflowing: "overflowing", Frozen: "frozen",
	KubeletRestarting: "kubelet-restarting", Gone: "gone", OldExporter: "old-exporter"}

func (l Life) String() string { return lifeNames[l] }

// MarshalText names the life, in JSON too.
func (l Life) MarshalText() ([]byte, error) {
	if _, ok := lifeNames[l]; !ok {
		return nil, fmt.Errorf("fleet: no life %d", int(l))
	}
	return []byte(lifeNames[l]), nil
}

// UnmarshalText reads a life's name.
func (l *Life) UnmarshalText(b []byte) error {
	for life, name := range lifeNames {
		if name == string(b) {
			*l = life
			return nil
		}
	}
	return fmt.Errorf("fleet: no life %q", b)
}

// Lives lists every life in order.
var Lives = []Life{Healthy, Creeping, Overflowing, Frozen, KubeletRestarting, Gone, OldExporter}

// Config describes the fleet.
type Config struct {
	// Clusters name the clusters; nodes are dealt to them in turn. Empty:
	// one cluster, "sim".
	Clusters []string
	// Nodes is the number of nodes in all.
	Nodes int
	// Shares are the fractions of nodes per life (Healthy takes the rest);
	// each life with a share gets at least one node.
	Shares map[Life]float64
	// FaultAfter is when overflowing, frozen and gone nodes fail.
	FaultAfter time.Duration
	// CreepPerHour is the creeping nodes' climb, a fraction of the limit.
	CreepPerHour float64
	// KubeletRestartEvery and KubeletRestartDown script restarting kubelets.
	KubeletRestartEvery, KubeletRestartDown time.Duration
	// Namespaces turns on the per-namespace metrics (--collector.namespaces).
	Namespaces bool
	// RelistInterval, RelistTimeout and Threshold are the exporter's flags
	// (10s, 2m, 3m by default).
	RelistInterval, RelistTimeout, Threshold time.Duration
	// Seed deals the lives; the same seed and size give the same fleet.
	Seed uint64
	// Start, when set, is when the lives begin on a virtual clock that
	// History moves up to the wall clock's time; zero: now, on the wall
	// clock.
	Start time.Time
}

// DefaultShares is a fleet in the proportions of the issue: most healthy.
var DefaultShares = map[Life]float64{Creeping: 0.04, Overflowing: 0.01, Frozen: 0.01, KubeletRestarting: 0.02, Gone: 0.005,
	OldExporter: 0.02}

func (c *Config) defaults() {
	if len(c.Clusters) == 0 {
		c.Clusters = []string{"sim"}
	}
	if c.Shares == nil {
		c.Shares = DefaultShares
	}
	if c.RelistInterval == 0 {
		c.RelistInterval = 10 * time.Second
	}
	if c.RelistTimeout == 0 {
		c.RelistTimeout = 2 * time.Minute
	}
	if c.Threshold == 0 {
		c.Threshold = 3 * time.Minute
	}
	if c.KubeletRestartEvery == 0 {
		c.KubeletRestartEvery = 10 * time.Minute
	}
	if c.KubeletRestartDown == 0 {
		c.KubeletRestartDown = 20 * time.Second
	}
	if c.CreepPerHour == 0 {
		c.CreepPerHour = 0.1
	}
}

// Sim is a running fleet.
type Sim struct {
	cfg   Config
	rec   *Recording
	clock *clock
	start time.Time
	nodes []*Node
	byKey map[string]*Node
	// self is the exporter's own process and Go metrics, the same for
	// every node (they are one process here).
	self *prometheus.Registry
	// hist is where History stands; held are the relists it left under
	// way, by node.
	hist   *history
	held   map[*Node]chan struct{}
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Node is one simulated node.
type Node struct {
	Name, Cluster string
	Life          Life
	// IP is the node's made-up address, in its targets' instance labels.
	IP string

	sim      *Sim
	index    int
	offset   time.Duration // spreads restarts and creeping over the fleet
	relister *pleg.Relister
	runtime  *replay
	// product gathers the exporter's product series (an older exporter's
	// families only), kubeletRegistry the kubelet's: what History emits.
	product         prometheus.Gatherer
	kubeletRegistry *prometheus.Registry
	exporter        http.Handler
	kubelet         http.Handler
}

// New deals the lives and builds each node's relister and collector. Start
// runs them.
func New(cfg Config, rec *Recording) (*Sim, error) {
	cfg.defaults()
	if cfg.Nodes <= 0 {
		return nil, fmt.Errorf("fleet: %d nodes", cfg.Nodes)
	}
	s := &Sim{cfg: cfg, rec: rec, clock: newClock(cfg.Start), start: cfg.Start, byKey: map[string]*Node{}, self: prometheus.NewRegistry()}
	if s.start.IsZero() {
		s.start = time.Now()
	}
	s.self.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	rng := rand.New(rand.NewPCG(cfg.Seed, 1))
	per := cfg.Nodes / len(cfg.Clusters)
	for ci, cluster := range cfg.Clusters {
		size := per
		if ci == 0 {
			size += cfg.Nodes % len(cfg.Clusters)
		}
		// Each cluster has every life in its shares.
		lives, err := deal(cfg, size, cfg.Seed+uint64(ci))
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", cluster, err)
		}
		for c, life := range lives {
			// Each cluster numbers its nodes from 0: the same node names
			// in two clusters, as clusters built from one template have,
			// which every join of the mixin must tell apart by cluster.
			n := &Node{
				Name: fmt.Sprintf("sim-node-%05d", c), Cluster: cluster, Life: life,
				IP: fmt.Sprintf("10.%d.%d.%d", 64+c>>16, (c>>8)&255, c&255), sim: s, index: len(s.nodes),
				offset: time.Duration(rng.Int64N(int64(cfg.KubeletRestartEvery))),
			}
			n.build()
			s.nodes = append(s.nodes, n)
			s.byKey[n.Cluster+"/"+n.Name] = n
		}
	}
	return s, nil
}

// deal gives each life its share of nodes nodes, shuffled by the seed.
func deal(cfg Config, nodes int, seed uint64) ([]Life, error) {
	lives := make([]Life, 0, nodes)
	for _, l := range Lives[1:] {
		share := cfg.Shares[l]
		if share < 0 || share > 1 {
			return nil, fmt.Errorf("fleet: share %v of %s", share, l)
		}
		if share == 0 {
			continue
		}
		k := max(1, int(math.Round(share*float64(nodes))))
		for range k {
			lives = append(lives, l)
		}
	}
	if len(lives) > nodes {
		return nil, fmt.Errorf("fleet: %d nodes are too few for the other lives' shares (%d)", nodes, len(lives))
	}
	for len(lives) < nodes {
		lives = append(lives, Healthy)
	}
	rng := rand.New(rand.NewPCG(seed, 2))
	rng.Shuffle(len(lives), func(i, j int) { lives[i], lives[j] = lives[j], lives[i] })
	return lives, nil
}

func (n *Node) build() {
	cfg := n.sim.cfg
	now := n.sim.clock.Now
	coll := collector.New(collector.Config{Threshold: cfg.Threshold, LimitBytes: n.sim.rec.LimitBytes, Probes: true, Status: true, Now: now})
	n.runtime = &replay{node: n}
	n.relister = pleg.NewRelister(n.runtime, pleg.Config{
		Interval: cfg.RelistInterval, LimitBytes: n.sim.rec.LimitBytes, Probes: true, Status: true,
		StatusStartupPods: 20, StatusStartupTimeout: 5 * time.Second, StatusMaxDuration: cfg.Threshold, Now: now,
	}, coll, slog.New(slog.DiscardHandler))
	reg := prometheus.NewRegistry()
	reg.MustRegister(buildInfo(n.Life), coll)
	n.product = reg
	if n.Life == OldExporter {
		n.product = oldExporter{reg}
	}
	// The exporter's handler as cmd/pleg_exporter builds it: its own
	// process and Go series, and the handler's request counters.
	handler := prometheus.NewRegistry()
	var g prometheus.Gatherer = prometheus.Gatherers{n.sim.self, handler, reg}
	if n.Life == OldExporter {
		g = oldExporter{g}
	}
	h := promhttp.InstrumentMetricHandler(handler, promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	n.exporter = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.exporterGone(n.sim.clock.Now()) {
			http.Error(w, "the exporter's pod is gone", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	})
	kreg := prometheus.NewRegistry()
	kreg.MustRegister(&kubelet{node: n})
	n.kubeletRegistry = kreg
	kh := promhttp.HandlerFor(kreg, promhttp.HandlerOpts{})
	n.kubelet = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, down := n.kubeletStart(n.sim.clock.Now()); down {
			http.Error(w, "the kubelet is restarting", http.StatusServiceUnavailable)
			return
		}
		kh.ServeHTTP(w, r)
	})
}

// Start runs every node's relist loop, on the wall clock, until Stop.
func (s *Sim) Start() {
	s.live()
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	for _, n := range s.nodes {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			// Spread the nodes' relists over the interval, as nodes that
			// started at different times are.
			select {
			case <-time.After(time.Duration(n.index) * s.cfg.RelistInterval / time.Duration(len(s.nodes))):
			case <-ctx.Done():
				return
			}
			if done := s.held[n]; done != nil {
				select {
				case <-done:
				case <-ctx.Done():
					return
				}
			}
			n.relister.Run(ctx)
		}()
	}
}

// Stop ends the relist loops.
func (s *Sim) Stop() {
	if s.cancel != nil {
		s.cancel()
	}
	s.clock.real()
	s.wg.Wait()
}

// Now is the fleet's time.
func (s *Sim) Now() time.Time { return s.clock.Now() }

// Nodes returns the nodes, in the order they were dealt.
func (s *Sim) Nodes() []*Node { return s.nodes }

// Started is when the simulated lives began.
func (s *Sim) Started() time.Time { return s.start }

// ByLife counts the nodes of each life.
func (s *Sim) ByLife() map[Life]int {
	m := map[Life]int{}
	for _, n := range s.nodes {
		m[n.Life]++
	}
	return m
}

// Keys returns the nodes of one life as CLUSTER/NODE, sorted.
func (s *Sim) Keys(l Life) []string {
	var out []string
	for _, n := range s.nodes {
		if n.Life == l {
			out = append(out, n.Cluster+"/"+n.Name)
		}
	}
	sort.Strings(out)
	return out
}

// faulted says whether the node's fault has begun.
func (n *Node) faulted(now time.Time) bool { return now.Sub(n.sim.start) >= n.sim.cfg.FaultAfter }

func (n *Node) exporterGone(now time.Time) bool { return n.Life == Gone && n.faulted(now) }

// frozen says whether the node's runtime answers no call at now.
func (n *Node) frozen(now time.Time) bool { return n.Life == Frozen && n.faulted(now) }

// phase is the recorded population the node has at now.
func (n *Node) phase(now time.Time) Phase {
	rec := n.sim.rec
	switch {
	case n.Life == Overflowing && n.faulted(now):
		return rec.Overflow
	case n.Life == Creeping:
		hours := (now.Sub(n.sim.start) + n.offset).Hours()
		ratio := rec.Ratio(rec.Creeping[0]) + n.sim.cfg.CreepPerHour*hours
		p := rec.Creeping[0]
		for _, c := range rec.Creeping {
			if rec.Ratio(c) <= ratio {
				p = c
			}
		}
		return p
	case n.Life == Overflowing:
		// The node that overflows was the largest before.
		return rec.Healthy[len(rec.Healthy)-1]
	}
	return rec.Healthy[n.index%len(rec.Healthy)]
}

// kubeletStart is when the node's kubelet last started, and whether it is
// down (restarting) at now.
func (n *Node) kubeletStart(now time.Time) (time.Time, bool) {
	// Every kubelet started a while before the fleet's exporters did.
	boot := n.sim.start.Add(-24*time.Hour - n.offset)
	if n.Life != KubeletRestarting {
		return boot, false
	}
	cfg := n.sim.cfg
	since := now.Sub(n.sim.start) + n.offset
	if since < cfg.KubeletRestartEvery {
		return boot, false
	}
	last := n.sim.start.Add(-n.offset + since.Truncate(cfg.KubeletRestartEvery))
	up := last.Add(cfg.KubeletRestartDown)
	return up, now.Before(up)
}
