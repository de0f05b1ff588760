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

// Package diagnose builds the one-shot report of `pleg_exporter diagnose`:
// which namespaces and pods hold the containers and bytes that push a node
// towards "PLEG is not healthy", which sandboxes hang, and the exact cleanup.
// It reads the runtime layer's Inventory only (package kubecontainer).
package diagnose

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/pleg-exporter/pleg_exporter/gc"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// Thresholds decide when a node is at risk; the defaults are the mixin's
// warning thresholds.
type Thresholds struct {
	LimitBytes        int64
	PayloadRatio      float64
	ExitedContainers  int
	NotReadySandboxes int
	Top               int
	// GCCommand is how `pleg_exporter gc` is run on this node (with the
	// runtime flags diagnose ran with); empty: plain "pleg_exporter gc".
	GCCommand string
}

// DefaultThresholds are the mixin's warning thresholds
// (mixin/config.libsonnet); a test of the mixin fails when they drift.
var DefaultThresholds = Thresholds{LimitBytes: kubecontainer.GRPCLimitBytes, PayloadRatio: 0.75, ExitedContainers: 5000, NotReadySandboxes: 1000, Top: 10}

// Report is the result, printed as text or JSON.
type Report struct {
	Time        time.Time          `json:"time"`
	Runtime     kubecontainer.Info `json:"runtime"`
	AtRisk      bool               `json:"at_risk"`
	Reasons     []string           `json:"reasons"`
	Containers  map[string]int     `json:"containers"`
	Docker      map[string]int     `json:"docker_containers,omitempty"`
	Sandboxes   map[string]int     `json:"sandboxes"`
	Payload     []Payload          `json:"payload"`
	ListError   string             `json:"kubelet_list_error,omitempty"`
	Fallback    bool               `json:"counted_through_fallback"`
	Incomplete  string             `json:"incomplete,omitempty"`
	Namespaces  []Share            `json:"top_namespaces_by_containers"`
	NSBytes     []Share            `json:"top_namespaces_by_bytes"`
	Pods        []Share            `json:"top_pods_by_containers"`
	PodBytes    []Share            `json:"top_pods_by_bytes"`
	Suspects    []Suspect          `json:"unknown_or_dead_containers"`
	NotReady    []Suspect          `json:"notready_sandboxes"`
	NotReadyAll int                `json:"notready_sandboxes_total"`
	Probes      []Probe            `json:"slowest_status_calls"`
	// Inspected pods had the kubelet's GetPodStatus made; StatusFailures
	// are those whose calls failed (the kubelet's relist waits on each).
	Inspected      int             `json:"pods_inspected"`
	NotInspected   int             `json:"pods_not_inspected,omitempty"`
	StatusFailures []StatusFailure `json:"pod_status_failures"`
	// GC is the fix to try first: what `pleg_exporter gc` would remove;
	// nil when it finds nothing. Cleanup is the manual alternative.
	GC      *GCAdvice `json:"gc,omitempty"`
	Cleanup []Step    `json:"cleanup"`
}

// GCAdvice is the plan of `pleg_exporter gc` for the node, in figures.
type GCAdvice struct {
	// Policy is the one the node needs (gc.PolicyKubelet or
	// gc.PolicyFinishedPods); Command applies it, DryRun shows both.
	Policy  string `json:"policy"`
	Command string `json:"command"`
	DryRun  string `json:"dry_run"`
	Why     string `json:"why"`
	// Containers and Sandboxes it removes; FinishedPods is how many pods
	// lose everything (and their logs) under --finished-pods.
	Containers   int              `json:"containers"`
	Sandboxes    int              `json:"sandboxes"`
	FinishedPods int              `json:"finished_pods,omitempty"`
	Before       map[string]int64 `json:"before_bytes"`
	After        map[string]int64 `json:"after_bytes"`
	// Fits is true when both answers end under the limit.
	Fits bool `json:"fits"`
}

// Payload is one answer against the limit.
type Payload struct {
	RPC        string  `json:"rpc"`
	Bytes      int64   `json:"bytes"`
	LimitBytes int64   `json:"limit_bytes"`
	Ratio      float64 `json:"ratio"`
	// Items is how many items the answer holds.
	Items int `json:"items"`
	// MoreFit is how many more average items fit before the limit
	// (negative past it; 0 when there are no items to average).
	MoreFit int `json:"more_fit"`
}

// Share is a namespace's or a pod's part.
type Share struct {
	Name       string         `json:"name"`
	Containers int            `json:"containers"`
	ByState    map[string]int `json:"by_state"`
	Bytes      int64          `json:"bytes"`
	Fraction   float64        `json:"fraction_of_bytes"`
}

// Suspect is a container or sandbox worth a look.
type Suspect struct {
	ID    string `json:"id"`
	Where string `json:"where"` // namespace/pod[/container]
	State string `json:"state"`
	Age   string `json:"age"`
}

// Probe is one timed status call.
type Probe struct {
	Kind     string `json:"kind"`
	ID       string `json:"id"`
	Where    string `json:"where"`
	Duration string `json:"duration"`
	Result   string `json:"result"`
}

// StatusFailure is a pod whose GetPodStatus failed: the call, its error,
// and how to find what holds it.
type StatusFailure struct {
	Pod      string   `json:"pod"` // namespace/name
	UID      string   `json:"uid"`
	RPC      string   `json:"rpc"`
	ID       string   `json:"id,omitempty"` // sandbox or container
	Code     string   `json:"code"`
	Error    string   `json:"error"`
	Duration string   `json:"duration"`
	Look     []string `json:"look"` // commands that show what holds the call
}

// Step is one cleanup action. Command is empty when the step would have
// named a value that is not a valid Kubernetes name or ID; Why says so.
type Step struct {
	Why     string `json:"why"`
	Command string `json:"command"`
	Warning string `json:"warning,omitempty"`
}

// Build turns an inventory into a report.
func Build(inv *kubecontainer.Inventory, th Thresholds, now time.Time) *Report {
	r := &Report{Time: now.UTC(), Runtime: inv.Info, Fallback: inv.Fallback, Incomplete: inv.Incomplete,
		Containers: map[string]int{}, Sandboxes: map[string]int{}}
	if inv.ListErr != nil {
		r.ListError = inv.ListErr.Error()
	}
	r.count(inv, th, now)
	r.payloads(inv, th)
	if n := r.Containers[kubecontainer.ContainerExited] + r.Containers[kubecontainer.ContainerUnknown]; n > th.ExitedContainers {
		r.reason("%d exited or unknown containers are listed by every relist", n)
	}
	if r.NotReadyAll > th.NotReadySandboxes {
		r.reason("%d notready sandboxes are listed by every relist", r.NotReadyAll)
	}
	if r.Docker[kubecontainer.DockerDead] > 0 {
		r.reason("%d Docker containers are dead (a removal failed); status calls on them can hang", r.Docker[kubecontainer.DockerDead])
	}
	r.probes(inv, th.Top)
	r.statusFailures(inv)
	r.GC = adviseGC(inv, th, now)
	r.Cleanup = cleanup(inv, r, th.LimitBytes)
	return r
}

// count tallies containers and sandboxes by state, the namespaces and pods
// that hold them, and the suspects: unknown or dead containers and
// notready sandboxes, oldest first.
func (r *Report) count(inv *kubecontainer.Inventory, th Thresholds, now time.Time) {
	for _, s := range kubecontainer.ContainerStates {
		r.Containers[s] = 0
	}
	for _, s := range kubecontainer.SandboxStates {
		r.Sandboxes[s] = 0
	}
	ns, pods := map[string]*Share{}, map[string]*Share{}
	var ctBytes int64
	var suspects []kubecontainer.Container
	for _, c := range inv.Containers {
		if c.DockerState != "" {
			if r.Docker == nil {
				r.Docker = map[string]int{}
			}
			r.Docker[c.DockerState]++
		}
		if c.State == kubecontainer.ContainerDockerOnly {
			continue // invisible to the kubelet
		}
		r.Containers[c.State]++
		ctBytes += c.Bytes
		add(ns, orNone(c.Namespace), c)
		add(pods, orNone(c.Namespace)+"/"+orNone(c.Pod), c)
		if c.State == kubecontainer.ContainerUnknown || c.DockerState == kubecontainer.DockerDead {
			suspects = append(suspects, c)
		}
	}
	sort.SliceStable(suspects, func(i, j int) bool { return olderFirst(suspects[i].CreatedAt, suspects[j].CreatedAt) })
	for _, c := range suspects {
		r.Suspects = append(r.Suspects, Suspect{ID: c.ID, Where: c.Namespace + "/" + c.Pod + "/" + c.Name, State: orState(c), Age: age(now, c.CreatedAt)})
	}
	var notready []kubecontainer.Sandbox
	for _, s := range inv.Sandboxes {
		r.Sandboxes[s.State]++
		if s.State == kubecontainer.SandboxNotReady {
			notready = append(notready, s)
		}
	}
	sort.SliceStable(notready, func(i, j int) bool { return olderFirst(notready[i].CreatedAt, notready[j].CreatedAt) })
	r.NotReadyAll = len(notready)
	for i, s := range notready {
		if i == th.Top {
			break
		}
		r.NotReady = append(r.NotReady, Suspect{ID: s.ID, Where: s.Namespace + "/" + s.Pod, State: s.State, Age: age(now, s.CreatedAt)})
	}
	r.Namespaces, r.NSBytes = top(ns, th.Top, ctBytes)
	r.Pods, r.PodBytes = top(pods, th.Top, ctBytes)
}

// payloads puts each answer against the limit, with how many more items
// fit.
func (r *Report) payloads(inv *kubecontainer.Inventory, th Thresholds) {
	// The items of each answer: the ListContainers answer holds the
	// kubelet's containers only, not the Docker containers it does not see.
	items := map[string]int{kubecontainer.RPCListContainers: 0, kubecontainer.RPCListPodSandbox: len(inv.Sandboxes)}
	for _, c := range inv.Containers {
		if c.State != kubecontainer.ContainerDockerOnly {
			items[kubecontainer.RPCListContainers]++
		}
	}
	for _, rpc := range []string{kubecontainer.RPCListPodSandbox, kubecontainer.RPCListContainers} {
		b, ok := inv.Payload[rpc]
		if !ok {
			continue
		}
		p := payload(rpc, b, th.LimitBytes, items[rpc])
		r.Payload = append(r.Payload, p)
		switch {
		case p.Ratio >= 1:
			r.reason("the %s answer is %s, larger than the kubelet's %s limit: every kubelet relist and container GC fails now", rpc, size(b), size(th.LimitBytes))
		case p.Ratio >= th.PayloadRatio && p.Items > 0:
			r.reason("the %s answer is %.1f%% of the kubelet's %s limit (about %d more items fit)", rpc, 100*p.Ratio, size(th.LimitBytes), p.MoreFit)
		case p.Ratio >= th.PayloadRatio:
			r.reason("the %s answer is %.1f%% of the kubelet's %s limit", rpc, 100*p.Ratio, size(th.LimitBytes))
		}
	}
}

// probes reports the slowest status probes, the top n, and counts the
// ones that timed out.
func (r *Report) probes(inv *kubecontainer.Inventory, n int) {
	names := map[string]string{}
	for _, c := range inv.Containers {
		names[c.ID] = c.Namespace + "/" + c.Pod + "/" + c.Name
	}
	for _, s := range inv.Sandboxes {
		names[s.ID] = s.Namespace + "/" + s.Pod
	}
	probes := append([]kubecontainer.ProbeResult(nil), inv.Probes...)
	sort.Slice(probes, func(i, j int) bool { return probes[i].Duration > probes[j].Duration })
	timeouts := 0
	for i, p := range probes {
		res := "ok"
		switch {
		case p.TimedOut:
			res = "TIMED OUT"
			timeouts++
		case p.Err != nil:
			res = p.Err.Error()
		}
		if i < n {
			r.Probes = append(r.Probes, Probe{Kind: p.Kind, ID: p.ID, Where: names[p.ID], Duration: p.Duration.Round(time.Millisecond).String(), Result: res})
		}
	}
	if timeouts > 0 {
		r.reason("%d status calls timed out: each costs a kubelet relist up to its 2m deadline", timeouts)
	}
}

// statusFailures reports the pods whose GetPodStatus failed. Each one the
// kubelet must inspect (it changed, or failed before) costs every relist
// the call's deadline, 2m; two make the node NotReady.
func (r *Report) statusFailures(inv *kubecontainer.Inventory) {
	r.Inspected, r.NotInspected = inv.Inspected, inv.NotInspected
	r.StatusFailures = []StatusFailure{}
	hung := 0
	for _, pi := range inv.Failed {
		f := StatusFailure{
			Pod: pi.Namespace + "/" + pi.Name, UID: pi.UID, RPC: pi.Failed.RPC, ID: pi.Failed.ID,
			Code: kubecontainer.ErrorCode(pi.Err), Error: pi.Err.Error(), Duration: pi.Failed.Duration.Round(time.Millisecond).String(),
		}
		if pi.Name == "" {
			f.Pod = "uid " + pi.UID
		}
		if f.Code == kubecontainer.CodeDeadlineExceeded {
			hung++
		}
		if id := pi.Failed.ID; validID(id) {
			// The shim of a sandbox is named by the sandbox's id on its
			// command line; a container's status goes through its
			// sandbox's shim.
			switch pi.Failed.RPC {
			case kubecontainer.RPCPodSandboxStatus:
				f.Look = append(f.Look, "ps -eo pid,etime,args | grep -F -- "+id+" | grep -v grep",
					"crictl ps -a --pod "+id)
			case kubecontainer.RPCContainerStatus:
				f.Look = append(f.Look, "ps -eo pid,etime,args | grep -F -- "+id+" | grep -v grep")
			}
		}
		r.StatusFailures = append(r.StatusFailures, f)
	}
	if n := len(r.StatusFailures); n > 0 {
		r.reason("%d pods' status calls fail (%d hang until their deadline): the kubelet's relist inspects each pod that changes "+
			"and again every relist after a failure, waiting up to its 2m deadline each time; two such pods make the node NotReady", n, hung)
	}
	if r.NotInspected > 0 {
		r.reason("%d pods were not inspected in the report's time: status calls are slow", r.NotInspected)
	}
}

// adviseGC plans `pleg_exporter gc` with the kubelet's defaults and says
// which policy the node needs, in the gc command's own words.
func adviseGC(inv *kubecontainer.Inventory, th Thresholds, now time.Time) *GCAdvice {
	command := th.GCCommand
	if command == "" {
		command = "pleg_exporter gc"
	}
	rep := gc.NewReport(inv, gc.Policy{KeepPerContainer: 1, LimitBytes: th.LimitBytes}, th.PayloadRatio, command, now)
	if rep.Recommended == "" {
		return nil
	}
	p := rep.Plans[rep.Recommended]
	a := &GCAdvice{Policy: rep.Recommended, Command: rep.Command, DryRun: command, Why: rep.Why, Before: p.Before, After: p.After, Fits: true}
	pods := map[string]bool{}
	for _, x := range p.Actions {
		if x.Kind == gc.KindSandbox {
			a.Sandboxes++
		} else {
			a.Containers++
		}
		if x.Rule == gc.RuleFinishedPod {
			pods[x.PodUID] = true
		}
	}
	a.FinishedPods = len(pods)
	for _, b := range p.After {
		if b >= th.LimitBytes {
			a.Fits = false
		}
	}
	return a
}

// payload compares one list answer with the limit. MoreFit divides what is
// left of the limit by the average size of the answer's items, so bytes and
// items must describe the same answer; with no items (or no bytes) there is
// no average and MoreFit stays 0. In floats: an integer average truncates to
// 0 whenever the items outnumber the bytes, and the division by it panicked.
func payload(rpc string, bytes, limit int64, items int) Payload {
	p := Payload{RPC: rpc, Bytes: bytes, LimitBytes: limit, Items: items, Ratio: float64(bytes) / float64(limit)}
	if items > 0 && bytes > 0 {
		fit := (float64(limit) - float64(bytes)) / (float64(bytes) / float64(items))
		p.MoreFit = int(max(min(fit, math.MaxInt32), math.MinInt32))
	}
	return p
}

// olderFirst orders by creation time, oldest first; an unknown (zero) time
// sorts last rather than as the oldest of all.
func olderFirst(a, b time.Time) bool {
	if a.IsZero() || b.IsZero() {
		return !a.IsZero() && b.IsZero()
	}
	return a.Before(b)
}

func (r *Report) reason(format string, args ...any) {
	r.AtRisk = true
	r.Reasons = append(r.Reasons, fmt.Sprintf(format, args...))
}

func orNone(s string) string {
	if s == "" {
		return kubecontainer.NoNamespace
	}
	return s
}

func orState(c kubecontainer.Container) string {
	if c.DockerState != "" {
		return c.State + " (docker: " + c.DockerState + ")"
	}
	return c.State
}

func add(m map[string]*Share, key string, c kubecontainer.Container) {
	s, ok := m[key]
	if !ok {
		s = &Share{Name: key, ByState: map[string]int{}}
		m[key] = s
	}
	s.Containers++
	s.ByState[c.State]++
	s.Bytes += c.Bytes
}

func top(m map[string]*Share, n int, total int64) (byCount, byBytes []Share) {
	all := make([]Share, 0, len(m))
	for _, s := range m {
		if total > 0 {
			s.Fraction = float64(s.Bytes) / float64(total)
		}
		all = append(all, *s)
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].Containers != all[j].Containers {
			return all[i].Containers > all[j].Containers
		}
		return all[i].Name < all[j].Name
	})
	byCount = append([]Share(nil), all[:min(n, len(all))]...)
	sort.Slice(all, func(i, j int) bool {
		if all[i].Bytes != all[j].Bytes {
			return all[i].Bytes > all[j].Bytes
		}
		return all[i].Name < all[j].Name
	})
	byBytes = append([]Share(nil), all[:min(n, len(all))]...)
	return byCount, byBytes
}

func age(now, t time.Time) string {
	if t.IsZero() {
		return "?"
	}
	d := now.Sub(t)
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	case d >= time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return d.Round(time.Second).String()
	}
}

var size = kubecontainer.FormatBytes

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
