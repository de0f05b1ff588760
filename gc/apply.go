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
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// Options are how a plan is applied.
type Options struct {
	// Rate bounds the removals per second: one call at a time, spaced so
	// that the runtime the kubelet depends on keeps answering it.
	Rate float64
	// Timeout is the deadline of each removal; one that reaches it is
	// reported and skipped.
	Timeout time.Duration
	// GiveUpAfter consecutive removals that time out or find the runtime
	// unreachable end the run: the runtime is not answering any more.
	GiveUpAfter int
	// Progress receives a line every ProgressEvery once the run has lasted
	// ProgressAfter; nil for none.
	Progress      io.Writer
	ProgressAfter time.Duration
	ProgressEvery time.Duration
}

// DefaultOptions are the command's defaults.
var DefaultOptions = Options{Rate: 50, Timeout: 30 * time.Second, GiveUpAfter: 5,
	ProgressAfter: 3 * time.Second, ProgressEvery: 5 * time.Second}

// Failure is a removal that did not happen.
type Failure struct {
	Action   Action `json:"action"`
	Error    string `json:"error"`
	TimedOut bool   `json:"timed_out"`
	// Hint says what to do about it, when the error is one we know.
	Hint string `json:"hint,omitempty"`
}

// Result is what a run did.
type Result struct {
	Planned int `json:"planned"`
	// Removed counts the removals that succeeded, Gone those of items
	// already gone (the kubelet removed them first): both are done.
	Removed map[string]int `json:"removed"`
	Gone    int            `json:"already_gone"`
	// Failures are the removals that failed or timed out, skipped.
	Failures []Failure `json:"failures"`
	// LeftAlone are the items whose state changed since the plan (a
	// container that runs now, a sandbox that is ready or holds
	// containers): not removed, and not a failure.
	LeftAlone []Failure `json:"left_alone"`
	// Left is each answer's size once the run ended, from the plan's
	// sizes less what was removed.
	Left map[string]int64 `json:"left_bytes"`
	// Interrupted is true when the run was stopped (Ctrl-C) before the
	// end of the plan; NotRun is how many removals it did not make.
	Interrupted bool `json:"interrupted"`
	NotRun      int  `json:"not_run"`
	// GaveUp is why the run ended early because the runtime stopped
	// answering.
	GaveUp string `json:"gave_up,omitempty"`
	// Removals counts the items tried, one at a time, at most Rate a
	// second; each is one status call and one removal (a sandbox: status,
	// its container list, removal) to the runtime.
	Removals int           `json:"removals"`
	Duration time.Duration `json:"duration_ns"`
}

// Done is how many planned removals are done (removed or already gone).
func (r *Result) Done() int { return r.Removed[KindContainer] + r.Removed[KindSandbox] + r.Gone }

// Apply removes the plan's items in order, one call at a time. stop ends
// the run between two calls (the call in flight finishes, within its
// deadline): the summary is still complete, and a new plan from a new
// inventory continues where this one stopped.
func Apply(stop context.Context, r kubecontainer.Remover, plan *Plan, o Options) *Result {
	res := &Result{Planned: len(plan.Actions), Removed: map[string]int{KindContainer: 0, KindSandbox: 0}, Left: map[string]int64{},
		Failures: []Failure{}, LeftAlone: []Failure{}}
	for rpc, b := range plan.Before {
		res.Left[rpc] = b
	}
	start := time.Now()
	nextProgress := start.Add(o.ProgressAfter)
	var interval time.Duration
	if o.Rate > 0 {
		interval = time.Duration(float64(time.Second) / o.Rate)
	}
	failedSandbox := map[string]bool{} // sandboxes whose containers could not all be removed
	unanswered := 0
	var last time.Time // when the previous removal started
	for i := range plan.Actions {
		a := &plan.Actions[i]
		// Pace: a removal starts at least one interval after the previous
		// one started, so no burst follows a slow call.
		if wait := time.Until(last.Add(interval)); i > 0 && wait > 0 {
			select {
			case <-stop.Done():
			case <-time.After(wait):
			}
		}
		if stop.Err() != nil {
			res.Interrupted, res.NotRun = true, len(plan.Actions)-i
			break
		}
		if a.Kind == KindSandbox && failedSandbox[a.ID] {
			res.LeftAlone = append(res.LeftAlone, Failure{Action: *a, Error: "kept: a container of this sandbox was not removed"})
			continue
		}
		last = time.Now()
		answered, err := res.remove(r, a, o.Timeout)
		if err != nil && a.Kind == KindContainer && !errors.Is(err, kubecontainer.ErrGone) {
			failedSandbox[a.SandboxID] = true
		}
		if answered {
			unanswered = 0
		} else {
			unanswered++
		}
		if o.GiveUpAfter > 0 && unanswered >= o.GiveUpAfter {
			res.GaveUp = fmt.Sprintf("the last %d removals timed out or found the runtime unreachable; last: %v", unanswered, err)
			res.NotRun = len(plan.Actions) - i - 1
			break
		}
		if o.Progress != nil && time.Now().After(nextProgress) {
			progress(o.Progress, res, plan, i+1, start)
			nextProgress = time.Now().Add(o.ProgressEvery)
		}
	}
	res.Duration = time.Since(start)
	return res
}

// remove makes one removal, on its own deadline, and counts its outcome.
// answered is false when the call timed out or found the runtime
// unreachable.
func (res *Result) remove(r kubecontainer.Remover, a *Action, timeout time.Duration) (answered bool, err error) {
	// The call does not inherit stop: Ctrl-C lets it finish.
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	if a.Kind == KindSandbox {
		err = r.RemoveSandbox(ctx, a.ID)
	} else {
		err = r.RemoveContainer(ctx, a.ID)
	}
	// The runtime's own deadline (the gRPC timeout it was sent) may
	// end the call a moment before ours does.
	timedOut := ctx.Err() == context.DeadlineExceeded || kubecontainer.ErrorCode(err) == kubecontainer.CodeDeadlineExceeded
	cancel()
	res.Removals++
	switch {
	case err == nil:
		res.Removed[a.Kind]++
		res.Left[a.RPC()] -= a.Bytes
	case errors.Is(err, kubecontainer.ErrGone):
		res.Gone++
		res.Left[a.RPC()] -= a.Bytes
	case errors.Is(err, kubecontainer.ErrChanged):
		res.LeftAlone = append(res.LeftAlone, Failure{Action: *a, Error: err.Error()})
	default:
		res.Failures = append(res.Failures, Failure{Action: *a, Error: err.Error(), TimedOut: timedOut, Hint: hint(a, err, timedOut)})
		return !(timedOut || kubecontainer.ErrorCode(err) == kubecontainer.CodeUnavailable), err
	}
	return true, err
}

// progress writes one line: how far, how much is left of the answer, the
// rate, and when it should end at that rate.
func progress(w io.Writer, res *Result, plan *Plan, n int, start time.Time) {
	el := time.Since(start)
	rate := float64(n) / el.Seconds()
	eta := "?"
	if rate > 0 {
		eta = (time.Duration(float64(len(plan.Actions)-n)/rate) * time.Second).Round(time.Second).String()
	}
	ct := res.Left[kubecontainer.RPCListContainers]
	fmt.Fprintf(w, "gc: %d/%d done (%d containers, %d sandboxes removed, %d already gone, %d failed) · ListContainers %s (%.1f%% of the limit) · %.1f/s · ETA %s\n",
		n-len(res.Failures), len(plan.Actions), res.Removed[KindContainer], res.Removed[KindSandbox], res.Gone, len(res.Failures),
		kubecontainer.FormatBytes(ct), 100*float64(ct)/float64(plan.Policy.LimitBytes), rate, eta)
}

// hint says what to do about a failure we know.
func hint(a *Action, err error, timedOut bool) string {
	msg := strings.ToLower(err.Error())
	switch {
	case strings.Contains(msg, "device or resource busy") || strings.Contains(msg, "filesystem is busy") || strings.Contains(msg, "target is busy"):
		find := "find the process whose mounts name its id in /proc/*/mountinfo"
		if hexID.MatchString(a.ID) {
			find = "find it with: grep -l " + kubecontainer.ShortID(a.ID) + " /proc/*/mountinfo"
		}
		return "something still holds this container's filesystem, most often a mount that leaked into another process's mount namespace; " +
			find + ", stop that process (or restart the runtime once the node is drained), then run gc again"
	case timedOut:
		return "the runtime did not answer in time (a hanging removal, as on a broken sandbox): skipped; look at the runtime's log for this id, then run gc again"
	case a.Rule == RuleDead:
		return "Docker failed to remove this container before (that is what dead means) and failed again: the error names the file or mount in the way; free it, then run gc again"
	case strings.Contains(msg, "conflict") || strings.Contains(msg, "in progress"):
		return "the runtime refused it for now (running, or being removed by someone else): run gc again later"
	}
	return ""
}

// hexID is an id as containerd and Docker write them, safe to print in a
// command.
var hexID = regexp.MustCompile(`^[0-9a-f]{12,64}$`)
