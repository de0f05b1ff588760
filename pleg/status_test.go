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
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer/kubecontainertest"
)

// inspectingRuntime relists prepared snapshots and inspects pods with a
// fake clock: each status call takes callTime, a hung one its deadline.
type inspectingRuntime struct {
	kubecontainertest.Runtime
	now      *time.Time
	callTime time.Duration
	deadline time.Duration
	hung     map[string]bool // pod uid whose PodSandboxStatus hangs
	inspect  []string        // pods inspected, in order
	during   func()          // called inside each call, after Begin
}

func (s *inspectingRuntime) Relist(ctx context.Context) *kubecontainer.Snapshot {
	snap := *s.Runtime.Relist(ctx) // a copy: the relister takes PodUIDs
	return &snap
}

func (s *inspectingRuntime) InspectPod(_ context.Context, uid string, track kubecontainer.CallTracker) kubecontainer.PodInspection {
	s.inspect = append(s.inspect, uid)
	in := kubecontainer.PodInspection{UID: uid, Namespace: "ns", Name: "pod-" + uid, Start: *s.now}
	for _, rpc := range []string{kubecontainer.RPCListPodSandbox, kubecontainer.RPCPodSandboxStatus, kubecontainer.RPCListContainers, kubecontainer.RPCContainerStatus} {
		id := ""
		if rpc == kubecontainer.RPCPodSandboxStatus || rpc == kubecontainer.RPCContainerStatus {
			id = "id-" + uid
		}
		track.Begin(rpc, id)
		if s.during != nil {
			s.during()
		}
		sc := kubecontainer.StatusCall{RPC: rpc, ID: id, Start: *s.now, Duration: s.callTime}
		if rpc == kubecontainer.RPCPodSandboxStatus && s.hung[uid] {
			sc.Duration, sc.Err = s.deadline, status.Error(codes.DeadlineExceeded, "context deadline exceeded")
		}
		*s.now = s.now.Add(sc.Duration)
		in.Calls = append(in.Calls, sc)
		track.End(sc)
		if sc.Err != nil {
			in.Err, in.Failed = sc.Err, sc
			break
		}
	}
	in.Duration = s.now.Sub(in.Start)
	return in
}

func podSnap(start time.Time, changesKnown bool, pods ...string) *kubecontainer.Snapshot {
	s := goodSnap(start)
	s.ChangesKnown = changesKnown
	s.PodUIDs = pods
	if pods == nil {
		s.PodUIDs = []string{}
	}
	return s
}

func statusRelister(rt *inspectingRuntime, now *time.Time, cfg Config) *Relister {
	cfg.Status = true
	rt.now = now
	return newTestRelister(rt, nil, now, cfg)
}

// The pass inspects the changed pods after the lists; the kubelet's age
// ("last seen", the start of the last accepted relist) grows through it,
// and the next relist starts when it ends.
func TestStatusPassInspectsChangedPods(t *testing.T) {
	now := t0
	rt := &inspectingRuntime{callTime: 10 * time.Millisecond, deadline: 2 * time.Minute}
	rt.Snaps = []*kubecontainer.Snapshot{podSnap(t0, true, "a", "b")}
	r := statusRelister(rt, &now, Config{})
	r.RelistOnce(context.Background())
	st := r.State()
	if !slices.Equal(rt.inspect, []string{"a", "b"}) {
		t.Errorf("inspected %v", rt.inspect)
	}
	last := st.Status.Last
	if st.Status.Passes != 1 || last.Pods != 2 || last.Duration != 80*time.Millisecond || last.Calls[kubecontainer.RPCContainerStatus] != 2 {
		t.Errorf("pass %+v (passes %d)", last, st.Status.Passes)
	}
	if st.Status.Calls[kubecontainer.RPCPodSandboxStatus] != 2 || st.Status.InFlight != nil || len(st.Status.Reinspect) != 0 {
		t.Errorf("status %+v", st.Status)
	}
	if !st.LastSeen.Equal(t0) {
		t.Errorf("last seen %v, want the relist's start", st.LastSeen)
	}
}

// One hung sandbox costs every relist the call's deadline: the pod is
// reinspected at every relist until it answers, the kubelet's age reaches
// G + U + interval + G, and the call in flight is visible while it hangs.
func TestStatusPassHungPodIsReinspected(t *testing.T) {
	now := t0
	rt := &inspectingRuntime{callTime: time.Millisecond, deadline: 2 * time.Minute, hung: map[string]bool{"a": true}}
	rt.Snaps = []*kubecontainer.Snapshot{podSnap(t0, true, "a"), podSnap(t0, true)}
	r := statusRelister(rt, &now, Config{})
	var inFlight []InFlight
	rt.during = func() {
		if f := r.State().Status.InFlight; f != nil {
			inFlight = append(inFlight, *f)
		}
	}
	r.RelistOnce(context.Background())
	st := r.State()
	if len(st.Status.Reinspect) != 1 || st.Status.Failures["DeadlineExceeded"] != 1 {
		t.Fatalf("reinspect %v failures %v", st.Status.Reinspect, st.Status.Failures)
	}
	f := st.Status.Reinspect["a"]
	if f.Call.RPC != kubecontainer.RPCPodSandboxStatus || f.Code != "DeadlineExceeded" || f.Name != "pod-a" || !f.Since.Equal(t0.Add(time.Millisecond+2*time.Minute)) {
		t.Errorf("failure %+v", f)
	}
	if len(inFlight) != 2 || inFlight[1].RPC != kubecontainer.RPCPodSandboxStatus || inFlight[1].UID != "a" || inFlight[1].ID != "id-a" {
		t.Errorf("in flight seen %+v", inFlight)
	}
	// The next relist starts an interval after the pass: the age the
	// kubelet's Healthy() would see just before it is past two minutes.
	now = now.Add(10 * time.Second)
	if age := now.Sub(st.LastSeen); age < 2*time.Minute+10*time.Second {
		t.Errorf("age before the next relist %s", age)
	}
	// Nothing changed, but a is reinspected and hangs again.
	rt.Snaps[1].Start = now
	r.RelistOnce(context.Background())
	st = r.State()
	if !slices.Equal(rt.inspect, []string{"a", "a"}) || st.Status.Failures["DeadlineExceeded"] != 2 || st.Status.Last.Failed != 1 {
		t.Errorf("inspected %v, failures %v", rt.inspect, st.Status.Failures)
	}
	if !st.Status.Reinspect["a"].Since.Equal(f.Since) {
		t.Errorf("a run of failures keeps its first time: %v", st.Status.Reinspect["a"].Since)
	}
	// It answers again: no longer reinspected.
	rt.hung = nil
	r.RelistOnce(context.Background())
	if st := r.State(); len(st.Status.Reinspect) != 0 || len(rt.inspect) != 3 {
		t.Errorf("after recovery: reinspect %v inspected %v", st.Status.Reinspect, rt.inspect)
	}
	if r.RelistOnce(context.Background()); len(rt.inspect) != 3 {
		t.Errorf("a healthy pod was inspected again without a change: %v", rt.inspect)
	}
}

// At start-up every pod is new to the exporter but not to the kubelet: they
// are inspected a few per relist, changed pods first, each once.
func TestStatusPassStartupBacklog(t *testing.T) {
	now := t0
	rt := &inspectingRuntime{callTime: time.Millisecond}
	var pods []string
	for i := range 7 {
		pods = append(pods, fmt.Sprintf("p%d", i))
	}
	rt.Snaps = []*kubecontainer.Snapshot{
		podSnap(t0, false, pods...), // the first complete relist: every pod
		podSnap(t0, true, "p5"),     // p5 changed
		podSnap(t0, true),
		podSnap(t0, true),
	}
	r := statusRelister(rt, &now, Config{StatusStartupPods: 3})
	var pending []int
	for range 4 {
		r.RelistOnce(context.Background())
		pending = append(pending, r.State().Status.Pending)
	}
	want := []string{"p0", "p1", "p2", "p5", "p3", "p4", "p6"}
	if !slices.Equal(rt.inspect, want) {
		t.Errorf("inspected %v, want %v", rt.inspect, want)
	}
	if !slices.Equal(pending, []int{4, 0, 0, 0}) {
		t.Errorf("pending after each relist %v", pending)
	}
	// 0: pods already there are inspected only when they change.
	now, rt.inspect = t0, nil
	rt.Rewind()
	r = statusRelister(rt, &now, Config{})
	for range 4 {
		r.RelistOnce(context.Background())
	}
	if !slices.Equal(rt.inspect, []string{"p5"}) {
		t.Errorf("without start-up inspections: %v", rt.inspect)
	}
	if p := r.State().Status.Pending; p != 0 {
		t.Errorf("without start-up inspections %d pods stay pending, want none", p)
	}
}

// A pass ends between two pods once it has run for the kubelet's threshold;
// the next one starts with the pods it did not reach.
func TestStatusPassCutShortAtThreshold(t *testing.T) {
	now := t0
	rt := &inspectingRuntime{callTime: time.Millisecond, deadline: 2 * time.Minute, hung: map[string]bool{"a": true, "b": true}}
	rt.Snaps = []*kubecontainer.Snapshot{podSnap(t0, true, "a", "b", "c"), podSnap(t0, true)}
	r := statusRelister(rt, &now, Config{StatusMaxDuration: 3 * time.Minute})
	r.RelistOnce(context.Background())
	st := r.State()
	if !slices.Equal(rt.inspect, []string{"a", "b"}) || !st.Status.Last.CutShort || st.Status.Pending != 1 {
		t.Fatalf("inspected %v, last %+v, pending %d", rt.inspect, st.Status.Last, st.Status.Pending)
	}
	rt.hung = nil
	r.RelistOnce(context.Background())
	if !slices.Equal(rt.inspect, []string{"a", "b", "c", "a", "b"}) {
		t.Errorf("inspected %v, want the pod left first, then the two to reinspect", rt.inspect)
	}
}

// Only a relist whose lists the kubelet would have accepted goes on to
// inspect pods: past the payload limit, or with the runtime down, there is
// no pass; a runtime that cannot inspect has none either.
func TestStatusPassOnlyAfterAcceptedLists(t *testing.T) {
	now := t0
	over := podSnap(t0, true, "a")
	over.RPCs[kubecontainer.RPCListContainers] = kubecontainer.RPCStat{PayloadBytes: 20 << 20, PayloadKnown: true}
	down := podSnap(t0, false)
	down.Err, down.Counted, down.PodUIDs = status.Error(codes.Unavailable, "refused"), false, nil
	rt := &inspectingRuntime{callTime: time.Millisecond}
	rt.Snaps = []*kubecontainer.Snapshot{over, down}
	r := statusRelister(rt, &now, Config{})
	r.RelistOnce(context.Background())
	r.RelistOnce(context.Background())
	if len(rt.inspect) != 0 || r.State().Status.Passes != 0 {
		t.Errorf("inspected %v in %d passes", rt.inspect, r.State().Status.Passes)
	}
	// Streamed, the same answer is accepted by a kubelet with the
	// CRIListStreaming gate.
	over2 := podSnap(t0, true, "a")
	over2.Err, over2.StreamAccepted = &kubecontainer.PayloadTooLargeError{RPC: "ListContainers", Size: 20 << 20, Limit: 16 << 20}, true
	rt.Snaps = []*kubecontainer.Snapshot{over2}
	rt.Rewind()
	r.RelistOnce(context.Background())
	if !slices.Equal(rt.inspect, []string{"a"}) {
		t.Errorf("stream-accepted relist: inspected %v", rt.inspect)
	}
	plain := &kubecontainertest.Runtime{Snaps: []*kubecontainer.Snapshot{podSnap(t0, true, "a")}}
	r = newTestRelister(plain, nil, &now, Config{Status: true})
	r.RelistOnce(context.Background())
	if r.State().Status.Passes != 0 {
		t.Error("a runtime without InspectPod made a pass")
	}
}

// Shutting down in the middle of a pass records nothing half done.
func TestStatusPassCancelled(t *testing.T) {
	now := t0
	ctx, cancel := context.WithCancel(context.Background())
	rt := &inspectingRuntime{callTime: time.Millisecond}
	rt.during = cancel
	rt.Snaps = []*kubecontainer.Snapshot{podSnap(t0, true, "a", "b")}
	r := statusRelister(rt, &now, Config{})
	r.RelistOnce(ctx)
	if st := r.State(); st.Status.Passes != 0 || len(rt.inspect) != 1 || len(st.Status.Reinspect) != 0 {
		t.Errorf("passes %d inspected %v reinspect %v", st.Status.Passes, rt.inspect, st.Status.Reinspect)
	}
}

// While a pod the kubelet reinspects keeps failing, the next relist follows
// the pass after the kubelet's 1s period, not the interval: the age keeps
// the kubelet's G + U + 1s + G. A pod failing since start-up, which the
// kubelet may not inspect, does not shorten the pause.
func TestStatusPassPauseWhileReinspecting(t *testing.T) {
	now := t0
	rt := &inspectingRuntime{callTime: time.Millisecond, deadline: 2 * time.Minute, hung: map[string]bool{"a": true, "b": true}}
	rt.Snaps = []*kubecontainer.Snapshot{podSnap(t0, false, "b"), podSnap(t0, true), podSnap(t0, true, "a")}
	r := statusRelister(rt, &now, Config{StatusStartupPods: 10, StatusStartupTimeout: 5 * time.Second})
	if p := r.nextPause(); p != 10*time.Second {
		t.Errorf("pause at rest %s", p)
	}
	r.RelistOnce(context.Background()) // b, inspected at start-up, fails
	if p := r.nextPause(); p != 10*time.Second || len(r.State().Status.Reinspect) != 1 {
		t.Errorf("pause with an unchanged pod failing: %s", p)
	}
	r.RelistOnce(context.Background())
	r.RelistOnce(context.Background()) // a changed and fails
	if p := r.nextPause(); p != time.Second {
		t.Errorf("pause while a changed pod is reinspected: %s", p)
	}
}
