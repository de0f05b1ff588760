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
	"errors"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer/kubecontainertest"
)

var t0 = time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)

// recorder is an Observer that keeps what it was told.
type recorder struct {
	mu     sync.Mutex
	states []State
	probes []kubecontainer.ProbeResult
}

func (r *recorder) Observe(st State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.states = append(r.states, st)
}

func (r *recorder) ObserveProbe(p kubecontainer.ProbeResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.probes = append(r.probes, p)
}

func goodSnap(start time.Time) *kubecontainer.Snapshot {
	s := kubecontainer.NewSnapshot(start)
	s.Duration = 120 * time.Millisecond
	s.RPCs[kubecontainer.RPCListPodSandbox] = kubecontainer.RPCStat{PayloadBytes: 51234, PayloadKnown: true}
	s.RPCs[kubecontainer.RPCListContainers] = kubecontainer.RPCStat{PayloadBytes: 9876543, PayloadKnown: true}
	s.Counted = true
	return s
}

func newTestRelister(rt kubecontainer.Runtime, obs Observer, now *time.Time, cfg Config) *Relister {
	cfg.Interval, cfg.LimitBytes = 10*time.Second, 16777216
	cfg.Now = func() time.Time { return *now }
	return NewRelister(rt, cfg, obs, slog.New(slog.DiscardHandler))
}

// The observer hears of the relister at creation (age counting from
// start-up), as soon as it knows who the runtime is, and after every relist,
// failed ones included.
func TestObserverToldEveryRelist(t *testing.T) {
	now := t0.Add(-2 * time.Second)
	obs := &recorder{}
	down := kubecontainer.NewSnapshot(t0)
	down.Err = status.Error(codes.Unavailable, "connection refused")
	r := newTestRelister(&kubecontainertest.Runtime{Snaps: []*kubecontainer.Snapshot{down, goodSnap(t0.Add(10 * time.Second))}}, obs, &now, Config{})
	now = t0
	r.RelistOnce(context.Background())
	r.RelistOnce(context.Background())
	first := obs.states[0]
	if first.Last != nil || first.InfoKnown || !first.LastSeen.Equal(t0.Add(-2*time.Second)) {
		t.Errorf("at creation: last %v, info known %v, last seen %v; want no relist, last seen at start-up", first.Last, first.InfoKnown, first.LastSeen)
	}
	if !obs.states[1].InfoKnown || obs.states[1].Last != nil {
		t.Errorf("second report: %+v; want the runtime's info before the first relist finished", obs.states[1])
	}
	byRelist := map[uint64]State{}
	for _, st := range obs.states {
		byRelist[st.Relists] = st
	}
	failed, good := byRelist[1], byRelist[2]
	if failed.Last != down || failed.Counted != nil || failed.Errors["Unavailable"] != 1 || !failed.LastSeen.Equal(first.LastSeen) {
		t.Errorf("after the failed relist: %+v", failed)
	}
	if good.Counted == nil || !good.LastSeen.Equal(t0.Add(10*time.Second)) {
		t.Errorf("after the good relist: %+v", good)
	}
	if last := obs.states[len(obs.states)-1]; last.Relists != 2 {
		t.Errorf("last report has %d relists, want 2", last.Relists)
	}
}

// A runtime that sends more than the kubelet can receive (no send cap on
// its side) is a kubelet failure even though we received it.
func TestPayloadOverLimitReceivedCountsAsFailure(t *testing.T) {
	now := t0.Add(-time.Minute)
	s := goodSnap(t0)
	s.RPCs[kubecontainer.RPCListContainers] = kubecontainer.RPCStat{PayloadBytes: 20 << 20, PayloadKnown: true}
	r := newTestRelister(&kubecontainertest.Runtime{Snaps: []*kubecontainer.Snapshot{s}}, nil, &now, Config{})
	now = t0
	r.RelistOnce(context.Background())
	st := r.State()
	if !errors.Is(st.Last.Err, kubecontainer.ErrPayloadTooLarge) || st.Errors["ResourceExhausted"] != 1 {
		t.Fatalf("err = %v, errors = %v", st.Last.Err, st.Errors)
	}
	if !st.LastSeen.Equal(t0.Add(-time.Minute)) {
		t.Errorf("last seen moved to %v", st.LastSeen)
	}
}

func currentGCPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// A relist holds its answer with the lower GC percent; scrapes between
// relists run with the process's own, and a lower process setting (or
// GOGC=off) is never raised.
func TestRelistGCPercentIsScopedToTheRelist(t *testing.T) {
	t.Setenv("GOGC", "")
	orig := debug.SetGCPercent(100)
	defer debug.SetGCPercent(orig)
	for _, tc := range []struct{ process, want int }{{100, 50}, {200, 50}, {20, 20}, {-1, -1}} {
		debug.SetGCPercent(tc.process)
		now := t0
		during := 0
		rt := &kubecontainertest.Runtime{Snaps: []*kubecontainer.Snapshot{goodSnap(t0)}, During: func() { during = currentGCPercent() }}
		r := newTestRelister(rt, nil, &now, Config{TuneMemory: true})
		r.RelistOnce(context.Background())
		after := currentGCPercent()
		debug.SetGCPercent(100)
		if during != tc.want || after != tc.process {
			t.Errorf("process GOGC %d: %d during the relist (want %d), %d after (want %d)", tc.process, during, tc.want, after, tc.process)
		}
	}
}

// On shutdown the relist in flight is cancelled by the exporter itself: it
// is neither counted as a relist the kubelet would fail nor recorded.
func TestRelistCancelledByShutdownIsNotRecorded(t *testing.T) {
	now := t0
	cancelled := kubecontainer.NewSnapshot(t0)
	cancelled.Err = status.Error(codes.Canceled, "context canceled")
	obs := &recorder{}
	r := newTestRelister(&kubecontainertest.Runtime{Snaps: []*kubecontainer.Snapshot{goodSnap(t0), cancelled}}, obs, &now, Config{})
	r.RelistOnce(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r.RelistOnce(ctx)
	st := r.State()
	if st.Relists != 1 || st.Errors["Canceled"] != 0 || st.Last.Err != nil {
		t.Fatalf("after a cancelled relist: relists %d, errors %v, last err %v; want 1 relist, no error", st.Relists, st.Errors, st.Last.Err)
	}
	if last := obs.states[len(obs.states)-1]; last.Relists != 1 {
		t.Fatalf("observer told of %d relists, want 1: the cancelled relist is not reported", last.Relists)
	}
}

// A sandbox whose status call hangs on every cycle is logged once, again
// after probeWarnEvery, and once more when it answers; the observer hears
// of every timeout.
func TestHangingProbeIsLoggedOncePerHour(t *testing.T) {
	now := t0
	hung := kubecontainer.ProbeResult{Kind: kubecontainer.ProbeSandbox, ID: "s-dead", Duration: 5 * time.Second, TimedOut: true}
	rt := &kubecontainertest.Prober{Runtime: kubecontainertest.Runtime{Snaps: []*kubecontainer.Snapshot{goodSnap(t0)}}, Probes: []kubecontainer.ProbeResult{hung}}
	var logs strings.Builder
	obs := &recorder{}
	r := NewRelister(rt, Config{Interval: 10 * time.Second, LimitBytes: 16777216, Probes: true, Now: func() time.Time { return now }},
		obs, slog.New(slog.NewTextHandler(&logs, nil)))
	cycle := func() {
		t.Helper()
		r.RelistOnce(context.Background())
		for r.Probing() {
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
	rt.Probes = []kubecontainer.ProbeResult{{Kind: kubecontainer.ProbeSandbox, ID: "s-dead", Duration: time.Millisecond}}
	cycle()
	cycle()
	if n := count("status probe answers again"); n != 1 {
		t.Fatalf("recovery logged %d times, want 1:\n%s", n, logs.String())
	}
	timeouts := 0
	for _, p := range obs.probes {
		if p.TimedOut {
			timeouts++
		}
	}
	if timeouts != 31 || len(obs.probes) != 33 {
		t.Fatalf("observer heard %d probes, %d timed out; want 33 and 31: every probe is reported", len(obs.probes), timeouts)
	}
}

// On cri-dockerd nodes a failing Docker view (a list over the receive limit,
// the Docker socket gone) is logged once per change; it is not a relist error.
func TestDockerViewFailureIsLoggedOnChange(t *testing.T) {
	good := goodSnap(t0)
	good.DockerContainers = map[string]int{kubecontainer.DockerDead: 0}
	failed := goodSnap(t0)
	failed.DockerErr = errors.New("answer to GET /containers/json is larger than the receive limit")
	rt := &kubecontainertest.Runtime{Snaps: []*kubecontainer.Snapshot{good, failed, failed, failed, good, good}}
	var logs strings.Builder
	obs := &recorder{}
	r := NewRelister(rt, Config{Interval: 10 * time.Second, LimitBytes: 16777216}, obs, slog.New(slog.NewTextHandler(&logs, nil)))
	for range 6 {
		r.RelistOnce(context.Background())
	}
	if n := strings.Count(logs.String(), `msg="docker view failed`); n != 1 {
		t.Errorf("three failed Docker views logged %d warnings, want 1:\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), `msg="docker view is back"`); n != 1 {
		t.Errorf("the recovery logged %d times, want 1:\n%s", n, logs.String())
	}
	for code, n := range r.State().Errors {
		if n != 0 {
			t.Errorf("relist errors %s = %d: the Docker view is not the kubelet's relist", code, n)
		}
	}
}
