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

package fleet

import (
	"container/heap"
	"context"
	"fmt"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// Emit receives one scrape of one target of a cluster at t: the target's
// labels (those of Targets, job among them, __metrics_path__ left out) and
// what it exposed; nil families when it did not answer.
type Emit func(t time.Time, cluster string, target map[string]string, families []*dto.MetricFamily) error

// relistEvent is a relist starting, or a held one ending, at a time.
type relistEvent struct {
	at   time.Time
	node *Node
	end  bool
}

// events is a min-heap of relist events by time.
type events []relistEvent

func (e events) Len() int           { return len(e) }
func (e events) Less(i, j int) bool { return e[i].at.Before(e[j].at) }
func (e events) Swap(i, j int)      { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)        { *e = append(*e, x.(relistEvent)) }
func (e *events) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

// held is a relist of a frozen runtime under way.
type held struct {
	end  time.Time
	done chan struct{}
}

// history is where History left the virtual clock.
type history struct {
	q     *events
	holds map[*Node]*held
	last  time.Time
}

// History lives the fleet made with Config.Start on the virtual clock from
// where it stands up to until: every node relists as its relist loop would
// (every RelistInterval, a frozen runtime's relist held until its
// deadline), and every step each target's exposition goes to emit, as a
// scrape would have seen it. The exporter's own process and Go series are
// left out (the wall clock's, and read by no rule or panel). Called again,
// it goes on from there; CatchUp runs it up to the wall clock. Start then
// runs the same nodes on on the wall clock.
func (s *Sim) History(ctx context.Context, until time.Time, step time.Duration, emit Emit) error {
	if !s.clock.virtual {
		return fmt.Errorf("fleet: History needs a fleet with Config.Start that has not started")
	}
	h := s.hist
	if h == nil {
		h = &history{q: &events{}, holds: map[*Node]*held{}, last: s.start}
		for _, n := range s.nodes {
			heap.Push(h.q, relistEvent{at: s.start.Add(time.Duration(n.index) * s.cfg.RelistInterval / time.Duration(len(s.nodes))), node: n})
		}
		s.hist = h
	}
	for t := h.last.Add(step); !t.After(until); t = t.Add(step) {
		if err := ctx.Err(); err != nil {
			return err
		}
		for h.q.Len() > 0 && !(*h.q)[0].at.After(t) {
			s.relist(ctx, heap.Pop(h.q).(relistEvent), h.q, h.holds)
		}
		s.clock.set(t)
		if err := s.scrapeAll(t, emit); err != nil {
			return err
		}
		h.last = t
	}
	return nil
}

// CatchUp runs History up to the wall clock, again and again until less
// than a step is left (each run is shorter than the one before), so that
// stored samples end where a Prometheus started next begins scraping. It
// returns the time of the last step.
func (s *Sim) CatchUp(ctx context.Context, step time.Duration, emit Emit) (time.Time, error) {
	for {
		now := time.Now()
		if s.hist != nil && now.Sub(s.hist.last) < step {
			return s.hist.last, nil
		}
		if err := s.History(ctx, now, step, emit); err != nil {
			return time.Time{}, err
		}
	}
}

// live hands the virtual clock over to the wall clock: the relists History
// left held go on until their deadline, and Start runs those nodes' relist
// loops once they end.
func (s *Sim) live() {
	if !s.clock.virtual {
		return
	}
	s.clock.real()
	s.held = map[*Node]chan struct{}{}
	if s.hist != nil {
		for n, h := range s.hist.holds {
			s.held[n] = h.done
		}
	}
}

// relist runs one event at its time: a relist, or the end of a held one.
func (s *Sim) relist(ctx context.Context, ev relistEvent, q *events, holds map[*Node]*held) {
	s.clock.set(ev.at)
	n := ev.node
	if ev.end {
		<-holds[n].done
		delete(holds, n)
		heap.Push(q, relistEvent{at: ev.at.Add(s.cfg.RelistInterval), node: n})
		return
	}
	if !n.frozen(ev.at) {
		n.relister.RelistOnce(ctx)
		heap.Push(q, relistEvent{at: ev.at.Add(s.cfg.RelistInterval), node: n})
		return
	}
	h := &held{end: ev.at.Add(s.cfg.RelistTimeout), done: make(chan struct{})}
	entered := make(chan struct{})
	n.runtime.entered = entered
	go func() { n.relister.RelistOnce(ctx); close(h.done) }()
	select {
	case <-entered:
	case <-h.done:
	}
	holds[n] = h
	heap.Push(q, relistEvent{at: h.end, node: n, end: true})
}

// scrapeAll emits every target of every node at t, in the nodes' order.
// The targets are gathered on a goroutine of their own while emit writes
// the ones before: the two cost about the same, so on two cores they
// overlap.
func (s *Sim) scrapeAll(t time.Time, emit Emit) error {
	type scrape struct {
		cluster string
		labels  map[string]string
		mfs     []*dto.MetricFamily
		err     error
	}
	out, stop := make(chan scrape, 64), make(chan struct{})
	// On an error the gatherer is stopped and waited for, so no Gather
	// runs on after scrapeAll while the next relist changes the nodes.
	defer func() {
		close(stop)
		for range out {
		}
	}()
	go func() {
		defer close(out)
		for _, n := range s.nodes {
			for _, tg := range s.nodeTargets(n, "") {
				sc := scrape{cluster: n.Cluster, labels: map[string]string{}}
				switch job := tg.Labels["job"]; {
				case job == "kubelet":
					if _, down := n.kubeletStart(t); !down {
						sc.mfs, sc.err = n.kubeletRegistry.Gather()
					}
				case !n.exporterGone(t):
					sc.mfs, sc.err = n.product.Gather()
				}
				if sc.err != nil {
					sc.err = fmt.Errorf("fleet: %s %s: %w", n.Name, tg.Labels["job"], sc.err)
				}
				for k, v := range tg.Labels {
					if k != "__metrics_path__" {
						sc.labels[k] = v
					}
				}
				select {
				case out <- sc:
				case <-stop:
					return
				}
			}
		}
	}()
	for sc := range out {
		if sc.err != nil {
			return sc.err
		}
		if err := emit(t, sc.cluster, sc.labels, sc.mfs); err != nil {
			return err
		}
	}
	return nil
}
