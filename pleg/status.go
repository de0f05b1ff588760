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
	"maps"
	"slices"
	"time"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// The status pass: after a relist whose lists the kubelet would have
// accepted, the kubelet calls GetPodStatus for every pod with an event and
// every pod whose inspection failed before, one after another, and its next
// relist starts only when the last one returns (pkg/kubelet/pleg/generic.go,
// Relist and updateCache). The relister does the same in its own loop, so
// that pleg_last_seen_seconds grows through a hung status call exactly as the
// kubelet's age does: G(n) + U(n) + interval + G(n+1).
//
// It differs from the kubelet on purpose in three places:
//   - it inspects the pods that changed since its own previous relist, once
//     per --relist.interval, where the kubelet inspects them once per change;
//     so it never adds more status calls than the kubelet makes;
//   - a pod it has never inspected because it was already there when the
//     exporter started is inspected StartupPods at a time, a few per relist,
//     each on the short StartupTimeout: a DaemonSet rolled out across a
//     fleet must not send a burst of status calls to every runtime at once,
//     and a pod whose status call already hangs is still found within
//     minutes. Whether the kubelet is reinspecting such a pod cannot be
//     seen from outside (it is when the pod changed since the hang began,
//     as a pod being torn down does), so a failed one is reinspected on the
//     short deadline until it changes, then on the kubelet's: it shows in
//     the reinspect and failure counts at once without making the
//     exporter's age two minutes older for a pod the kubelet may never
//     touch;
//   - a pass ends, between two pods, once it has run for MaxDuration (the
//     kubelet's threshold: past it the node is NotReady whatever follows);
//     the pods it did not reach are inspected first in the next pass.

// StatusState is what the status passes did, part of State.
type StatusState struct {
	// Passes counts the finished passes; Last is the latest (zero before
	// the first).
	Passes uint64
	Last   PassResult
	// Reinspect is the pods whose latest inspection failed, inspected
	// again in the next pass (the kubelet's podsToReinspect), by uid.
	Reinspect map[string]Failure
	// Pending is the pods listed at start-up and not inspected yet, plus
	// those a pass cut short did not reach.
	Pending int
	// Calls counts every status call made, by RPC; Failures every failed
	// inspection, by gRPC code.
	Calls    map[string]uint64
	Failures map[string]uint64
	// InFlight is the call under way now; nil between calls.
	InFlight *InFlight
}

// PassResult is one finished status pass.
type PassResult struct {
	Start    time.Time
	Duration time.Duration
	Pods     int            // pods inspected
	Calls    map[string]int // calls made, by RPC
	Failed   int            // inspections that failed
	CutShort bool           // ended at MaxDuration with pods left
}

// Failure is a pod whose inspection failed.
type Failure struct {
	UID, Namespace, Name string
	Call                 kubecontainer.StatusCall // the call that failed
	Code                 string                   // its gRPC code
	Since                time.Time                // first failure of this run of failures
	// Unchanged is set while the pod has not changed since the exporter
	// started: it is reinspected on the short start-up deadline.
	Unchanged bool
}

// InFlight is a status call under way.
type InFlight struct {
	RPC, ID string
	// The pod; its names only when a failed inspection learnt them.
	UID, Namespace, Name string
	Since                time.Time
}

// target is a pod of a pass; short: inspected on the start-up deadline
// (not changed since the exporter started).
type target struct {
	uid   string
	short bool
}

// statusPass is the relister's bookkeeping of the passes; only the relist
// loop touches it, under r.mu where State reads it.
type statusPass struct {
	startup  []string           // pods listed at start-up, not inspected yet
	carry    []target           // pods a cut-short pass did not reach
	failures map[string]Failure // uid → the failure, reinspected next pass
	state    StatusState
}

func newStatusPass() statusPass {
	return statusPass{
		failures: map[string]Failure{},
		state: StatusState{
			Calls: map[string]uint64{},
			// Present from the start so increase() sees the first one.
			Failures: map[string]uint64{kubecontainer.CodeDeadlineExceeded: 0},
		},
	}
}

// copyStatus returns a copy of the pass state for State; r.mu held.
func (r *Relister) copyStatus() StatusState {
	st := r.status.state
	st.Reinspect = maps.Clone(r.status.failures)
	st.Calls = maps.Clone(st.Calls)
	st.Failures = maps.Clone(st.Failures)
	st.Last.Calls = maps.Clone(st.Last.Calls)
	if st.InFlight != nil {
		f := *st.InFlight
		st.InFlight = &f
	}
	st.Pending = len(r.status.startup) + len(r.status.carry)
	return st
}

// inspectPods runs the status pass of the relist snap.
func (r *Relister) inspectPods(ctx context.Context, in kubecontainer.PodInspector, snap *kubecontainer.Snapshot, pods []string) {
	targets := r.passTargets(snap, pods)
	if len(targets) == 0 {
		r.mu.Lock()
		r.status.state.Passes++
		r.status.state.Last = PassResult{Start: r.now(), Calls: map[string]int{}}
		r.mu.Unlock()
		r.obs.Observe(r.State())
		return
	}
	res := PassResult{Start: r.now(), Calls: map[string]int{}}
	var left []target
	for i, tg := range targets {
		if ctx.Err() != nil {
			return
		}
		if r.cfg.StatusMaxDuration > 0 && r.now().Sub(res.Start) >= r.cfg.StatusMaxDuration {
			left = targets[i:]
			res.CutShort = true
			break
		}
		r.inspectPod(ctx, in, tg, &res)
	}
	if ctx.Err() != nil {
		return
	}
	res.Duration = r.now().Sub(res.Start)

	r.mu.Lock()
	wasCut := r.status.state.Last.CutShort
	r.status.carry = left
	r.status.state.Passes++
	r.status.state.Last = res
	r.mu.Unlock()
	r.obs.Observe(r.State())
	// Once per run of cut-short passes, not once per relist.
	if res.CutShort && !wasCut {
		r.logger.Warn("status pass cut short at the kubelet's threshold; the pods left are inspected first in the next pass",
			"after", res.Duration, "inspected", res.Pods, "left", len(left))
	}
}

// passTargets returns the pods of this pass, each once: the pods a cut-short
// pass did not reach, the changed pods, the pods to reinspect, then up to
// StartupPods of those listed at start-up.
func (r *Relister) passTargets(snap *kubecontainer.Snapshot, pods []string) []target {
	r.mu.Lock()
	defer r.mu.Unlock()
	ps := &r.status
	seen := map[string]bool{}
	var out []target
	add := func(uid string, short bool) {
		if !seen[uid] {
			seen[uid] = true
			out = append(out, target{uid: uid, short: short})
		}
	}
	for _, t := range ps.carry {
		add(t.uid, t.short)
	}
	ps.carry = nil
	if snap.ChangesKnown {
		for _, uid := range pods {
			add(uid, false)
			// A change: from now on the kubelet inspects it too.
			if f, ok := ps.failures[uid]; ok && f.Unchanged {
				f.Unchanged = false
				ps.failures[uid] = f
			}
		}
	} else if snap.Counted && pods != nil && !r.startupListed {
		// The first complete relist: every pod is new to us, though not to
		// the kubelet.
		r.startupListed = true
		if r.cfg.StatusStartupPods > 0 {
			ps.startup = pods
		}
	}
	for _, uid := range slices.Sorted(maps.Keys(ps.failures)) {
		add(uid, ps.failures[uid].Unchanged)
	}
	n := 0
	for len(ps.startup) > 0 && n < r.cfg.StatusStartupPods {
		uid := ps.startup[0]
		ps.startup = ps.startup[1:]
		if !seen[uid] {
			add(uid, true)
			n++
		}
	}
	// Pods inspected now for a change need no start-up inspection later.
	if len(seen) > 0 && len(ps.startup) > 0 {
		ps.startup = slices.DeleteFunc(ps.startup, func(uid string) bool { return seen[uid] })
	}
	return out
}

// inspectPod inspects one pod and records it.
func (r *Relister) inspectPod(ctx context.Context, in kubecontainer.PodInspector, tg target, res *PassResult) {
	uid := tg.uid
	r.mu.Lock()
	prev, failed := r.status.failures[uid]
	r.mu.Unlock()
	track := kubecontainer.CallTracker{
		Begin: func(rpc, id string) {
			f := &InFlight{RPC: rpc, ID: id, UID: uid, Since: r.now()}
			if failed {
				f.Namespace, f.Name = prev.Namespace, prev.Name
			}
			r.mu.Lock()
			r.status.state.InFlight = f
			r.mu.Unlock()
			r.obs.Observe(r.State())
		},
		End: func(sc kubecontainer.StatusCall) {
			res.Calls[sc.RPC]++
			r.mu.Lock()
			r.status.state.InFlight = nil
			r.status.state.Calls[sc.RPC]++
			r.mu.Unlock()
			r.obs.Observe(r.State())
		},
	}
	ictx := ctx
	if tg.short && r.cfg.StatusStartupTimeout > 0 {
		var cancel context.CancelFunc
		ictx, cancel = context.WithTimeout(ctx, r.cfg.StatusStartupTimeout)
		defer cancel()
	}
	pi := in.InspectPod(ictx, uid, track)
	if ctx.Err() != nil {
		return
	}
	res.Pods++
	code := kubecontainer.ErrorCode(pi.Err)
	r.mu.Lock()
	if pi.Err == nil {
		delete(r.status.failures, uid)
	} else {
		res.Failed++
		f := Failure{UID: uid, Namespace: pi.Namespace, Name: pi.Name, Call: pi.Failed, Code: code, Since: r.now(), Unchanged: tg.short}
		if failed {
			f.Since = prev.Since
			if f.Name == "" {
				f.Namespace, f.Name = prev.Namespace, prev.Name
			}
		}
		r.status.failures[uid] = f
		r.status.state.Failures[code]++
	}
	r.mu.Unlock()

	pod := pi.Namespace + "/" + pi.Name
	switch {
	case pi.Err != nil && (!failed || prev.Code != code):
		r.logger.Warn("pod status inspection failed; like the kubelet, it is inspected again at every relist until it answers",
			"pod", pod, "uid", uid, "rpc", pi.Failed.RPC, "id", pi.Failed.ID, "code", code, "after", pi.Failed.Duration, "err", pi.Err)
	case pi.Err == nil && failed:
		r.logger.Info("pod status inspection answers again", "pod", pod, "uid", uid, "failing for", r.now().Sub(prev.Since))
	}
}
