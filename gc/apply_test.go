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

package gc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// memRemover records the calls; ids in fail answer that error, ids in hang
// block until the caller's deadline.
type memRemover struct {
	mu      sync.Mutex
	calls   []string
	fail    map[string]error
	hang    map[string]bool
	onCall  func(n int)
	removed map[string]bool
	ctx     context.Context // of the call in progress
}

func (m *memRemover) do(ctx context.Context, id string) error {
	m.mu.Lock()
	m.calls = append(m.calls, id)
	n := len(m.calls)
	m.ctx = ctx
	m.mu.Unlock()
	if m.onCall != nil {
		m.onCall(n)
	}
	if m.hang[id] {
		<-ctx.Done()
		return status.FromContextError(ctx.Err()).Err()
	}
	if err := m.fail[id]; err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.removed == nil {
		m.removed = map[string]bool{}
	}
	m.removed[id] = true
	return nil
}

func (m *memRemover) RemoveContainer(ctx context.Context, id string) error { return m.do(ctx, id) }
func (m *memRemover) RemoveSandbox(ctx context.Context, id string) error   { return m.do(ctx, id) }

func plan(n int) *Plan {
	p := &Plan{Policy: Policy{LimitBytes: 100000}, Before: map[string]int64{kubecontainer.RPCListContainers: 50000, kubecontainer.RPCListPodSandbox: 1000}}
	for i := 0; i < n; i++ {
		p.Actions = append(p.Actions, Action{Kind: KindContainer, ID: fmt.Sprintf("c%d", i), SandboxID: "s", Bytes: 1000})
	}
	p.Actions = append(p.Actions, Action{Kind: KindSandbox, ID: "s", Bytes: 100})
	return p
}

func fast() Options {
	o := DefaultOptions
	o.Rate = 0
	o.Timeout = 100 * time.Millisecond
	return o
}

func TestApplyAll(t *testing.T) {
	m := &memRemover{}
	res := Apply(context.Background(), m, plan(10), fast())
	if res.Removed[KindContainer] != 10 || res.Removed[KindSandbox] != 1 || len(res.Failures) != 0 || res.Interrupted || res.Removals != 11 {
		t.Fatalf("result %+v", res)
	}
	if res.Left[kubecontainer.RPCListContainers] != 40000 || res.Left[kubecontainer.RPCListPodSandbox] != 900 {
		t.Errorf("left %v", res.Left)
	}
	if strings.Join(m.calls, ",") != "c0,c1,c2,c3,c4,c5,c6,c7,c8,c9,s" {
		t.Errorf("calls in order %v", m.calls)
	}
}

func TestApplyGoneFailedAndHanging(t *testing.T) {
	m := &memRemover{
		fail: map[string]error{
			"c1": fmt.Errorf("remove container c1: %w", kubecontainer.ErrGone),
			"c2": status.Error(codes.Unknown, `failed to remove: unlinkat /var/lib/docker/overlay2/x/merged: device or resource busy`),
		},
		hang: map[string]bool{"c4": true},
	}
	res := Apply(context.Background(), m, plan(6), fast())
	if res.Gone != 1 || res.Removed[KindContainer] != 3 || len(res.Failures) != 2 || len(res.LeftAlone) != 1 {
		t.Fatalf("result %+v", res)
	}
	f := map[string]Failure{}
	for _, x := range res.Failures {
		f[x.Action.ID] = x
	}
	if !strings.Contains(f["c2"].Hint, "mountinfo") || f["c2"].TimedOut {
		t.Errorf("busy: %+v", f["c2"])
	}
	if !f["c4"].TimedOut || !strings.Contains(f["c4"].Hint, "did not answer") {
		t.Errorf("hang: %+v", f["c4"])
	}
	// The sandbox of a container that could not go is not asked to go.
	if !strings.Contains(res.LeftAlone[0].Error, "kept") || m.removed["s"] {
		t.Errorf("sandbox: %+v", res.LeftAlone)
	}
	// Gone counts as done for the bytes.
	if res.Left[kubecontainer.RPCListContainers] != 50000-4000 {
		t.Errorf("left %v", res.Left)
	}
}

func TestApplyGivesUpOnARuntimeThatStopsAnswering(t *testing.T) {
	m := &memRemover{hang: map[string]bool{}}
	for i := 3; i < 20; i++ {
		m.hang[fmt.Sprintf("c%d", i)] = true
	}
	o := fast()
	o.GiveUpAfter = 3
	res := Apply(context.Background(), m, plan(20), o)
	if res.GaveUp == "" || len(m.calls) != 6 || res.NotRun != 21-6 {
		t.Errorf("gave up %q after %d calls, not run %d", res.GaveUp, len(m.calls), res.NotRun)
	}
}

// Ctrl-C: the call in flight finishes, none starts after it.
func TestApplyInterrupted(t *testing.T) {
	stop, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := &memRemover{}
	var inFlight error
	m.onCall = func(n int) {
		if n == 4 {
			cancel()
			// The call the signal came in does not see it.
			inFlight = m.ctx.Err()
		}
	}
	res := Apply(stop, m, plan(10), fast())
	if inFlight != nil {
		t.Errorf("the call in flight saw %v", inFlight)
	}
	if !res.Interrupted || len(m.calls) != 4 || !m.removed["c3"] || res.Removed[KindContainer] != 4 || res.NotRun != 7 {
		t.Errorf("interrupted=%v calls=%v removed=%v notrun=%d", res.Interrupted, m.calls, res.Removed, res.NotRun)
	}
}

// Pacing: n calls at rate r take at least (n-1)/r. (A lower bound only: a
// loaded machine makes it slower, never faster.)
func TestApplyRate(t *testing.T) {
	m := &memRemover{}
	o := fast()
	o.Rate = 100
	res := Apply(context.Background(), m, plan(10), o)
	if min := 100 * time.Millisecond; res.Duration < min {
		t.Errorf("11 calls at 100/s took %s, want at least %s", res.Duration, min)
	}
}

func TestProgressLines(t *testing.T) {
	var buf bytes.Buffer
	o := fast()
	o.Rate = 200
	o.Progress, o.ProgressAfter, o.ProgressEvery = &buf, 10*time.Millisecond, 10*time.Millisecond
	Apply(context.Background(), &memRemover{}, plan(20), o)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) < 2 || !strings.Contains(lines[0], "/21 done") || !strings.Contains(lines[0], "ETA") || !strings.Contains(lines[0], "of the limit") {
		t.Errorf("progress:\n%s", buf.String())
	}
}

func TestHintNeedsAValidID(t *testing.T) {
	err := errors.New("device or resource busy")
	if h := hint(&Action{ID: "$(reboot)"}, err, false); strings.Contains(h, "reboot") {
		t.Errorf("hint printed a runtime value that is not an id: %s", h)
	}
	if h := hint(&Action{ID: strings.Repeat("ab", 32)}, err, false); !strings.Contains(h, "grep -l abababababab") {
		t.Errorf("hint: %s", h)
	}
}

// A container that runs now (the remover's status check) is left alone: not
// removed, not a failure; its sandbox stays too.
func TestApplyLeavesChangedItemsAlone(t *testing.T) {
	m := &memRemover{fail: map[string]error{"c1": fmt.Errorf("container c1: %w (it runs now)", kubecontainer.ErrChanged)}}
	res := Apply(context.Background(), m, plan(3), fast())
	if len(res.Failures) != 0 || len(res.LeftAlone) != 2 || res.Removed[KindContainer] != 2 || m.removed["s"] {
		t.Errorf("failures %v, left alone %v, removed %v", res.Failures, res.LeftAlone, res.Removed)
	}
	if res.Left[kubecontainer.RPCListContainers] != 50000-2000 {
		t.Errorf("left %v", res.Left)
	}
}

// After a call that took long, the next waits one interval from its start:
// the pacing never catches up in a burst.
func TestApplyNoBurstAfterASlowCall(t *testing.T) {
	m := &memRemover{hang: map[string]bool{"c0": true}}
	var starts []time.Time
	m.onCall = func(int) { starts = append(starts, time.Now()) }
	o := fast()
	o.Rate, o.Timeout = 20, 300*time.Millisecond // 50 ms apart; the first call hangs 300 ms
	Apply(context.Background(), m, plan(4), o)
	for i := 2; i < len(starts); i++ {
		if gap := starts[i].Sub(starts[i-1]); gap < 45*time.Millisecond {
			t.Errorf("calls %d and %d %s apart, want at least 50ms", i-1, i, gap)
		}
	}
}
