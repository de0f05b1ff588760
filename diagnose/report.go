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
	"encoding/json"
	"fmt"
	"io"
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
var DefaultThresholds = Thresholds{LimitBytes: 16777216, PayloadRatio: 0.75, ExitedContainers: 5000, NotReadySandboxes: 1000, Top: 10}

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
	for _, s := range inv.Sandboxes {
		r.Sandboxes[s.State]++
	}
	var notready []kubecontainer.Sandbox
	for _, s := range inv.Sandboxes {
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
	if n := r.Containers[kubecontainer.ContainerExited] + r.Containers[kubecontainer.ContainerUnknown]; n > th.ExitedContainers {
		r.reason("%d exited or unknown containers are listed by every relist", n)
	}
	if r.NotReadyAll > th.NotReadySandboxes {
		r.reason("%d notready sandboxes are listed by every relist", r.NotReadyAll)
	}
	if r.Docker[kubecontainer.DockerDead] > 0 {
		r.reason("%d Docker containers are dead (a removal failed); status calls on them can hang", r.Docker[kubecontainer.DockerDead])
	}

	r.Namespaces, r.NSBytes = top(ns, th.Top, ctBytes)
	r.Pods, r.PodBytes = top(pods, th.Top, ctBytes)

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
		if i < th.Top {
			r.Probes = append(r.Probes, Probe{Kind: p.Kind, ID: p.ID, Where: names[p.ID], Duration: p.Duration.Round(time.Millisecond).String(), Result: res})
		}
	}
	if timeouts > 0 {
		r.reason("%d status calls timed out: each costs a kubelet relist up to its 2m deadline", timeouts)
	}
	r.statusFailures(inv)
	r.GC = adviseGC(inv, th, now)
	r.Cleanup = cleanup(inv, r, th.LimitBytes)
	return r
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
		if f.Code == "DeadlineExceeded" {
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

var size = gc.Size

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// batch feeds ids to a remove command a hundred at a time: the ids of
// tens of thousands of containers overflow a shell's argument list.
const batch = " | xargs -r -n 100 "

// crictlMargin: crictl reads a list with the same 16 MiB receive limit as
// the kubelet, so past the limit its plain list fails too; a filtered list
// is safe to read up to this share of the limit (the framing of each item
// adds a few bytes to the sum of their sizes).
const crictlMargin = 0.9

// maxListSteps bounds how many per-namespace or per-pod removals the report
// spells out; diagnose, run again, lists what is left.
const maxListSteps = 12

// cleanup writes the exact commands for this runtime, cordon first.
func cleanup(inv *kubecontainer.Inventory, r *Report, limit int64) []Step {
	steps := []Step{{
		Why:     "stop new pods landing here; drain before restarting the runtime or the kubelet, never restart them first",
		Command: "kubectl cordon NODE && kubectl drain NODE --ignore-daemonsets --delete-emptydir-data --timeout=5m",
	}}
	var unknown, dead []string
	for _, c := range inv.Containers {
		switch {
		case c.DockerState == kubecontainer.DockerDead:
			dead = append(dead, c.ID)
		case c.State == kubecontainer.ContainerUnknown:
			unknown = append(unknown, c.ID)
		}
	}
	var notready []string
	for _, s := range inv.Sandboxes {
		if s.State == kubecontainer.SandboxNotReady {
			notready = append(notready, s.ID)
		}
	}
	exited := r.Containers[kubecontainer.ContainerExited]
	if inv.View == kubecontainer.ViewDocker {
		if exited > 0 {
			steps = append(steps, Step{Why: fmt.Sprintf("remove the %d exited containers the kubelet lists (kubelet-created ones only)", exited),
				Command: "docker ps -aq --filter status=exited --filter label=io.kubernetes.docker.type=container" + batch + "docker rm"})
		}
		switch {
		case len(dead) > 20:
			steps = append(steps, Step{Why: fmt.Sprintf("remove the %d dead containers (if it fails again, release the mount or file that holds them)", len(dead)),
				Command: "docker ps -aq --filter status=dead" + batch + "docker rm -f"})
		case len(dead) > 0:
			steps = append(steps, removeByID("remove the %d dead containers (if it fails again, release the mount or file that holds them)",
				"docker rm -f", dead, "dead containers", "docker ps -a --filter status=dead")...)
		}
		if len(notready) > 0 {
			steps = append(steps, Step{Why: fmt.Sprintf("remove the %d sandboxes of finished pods", len(notready)),
				Command: "docker ps -aq --filter status=exited --filter label=io.kubernetes.docker.type=podsandbox" + batch + "docker rm"})
		}
		steps = append(steps, Step{Why: "or all at once", Command: "docker system prune -f",
			Warning: "removes every stopped container on the host (not only the kubelet's), unused networks and dangling images"})
	} else {
		// Sandboxes first: their list stays small enough to read past the
		// limit, and removing a finished pod's sandbox removes its
		// containers with it, usually most of the exited ones.
		if len(notready) > 0 {
			steps = append(steps, Step{Why: fmt.Sprintf("remove the %d notready sandboxes (finished pods) and their containers", len(notready)),
				Command: "crictl pods --state notready -q" + batch + "crictl rmp"})
		}
		if exited > 0 {
			steps = append(steps, exitedSteps(inv, exited, limit)...)
		}
		switch {
		case len(unknown) > 20:
			steps = append(steps, Step{Why: fmt.Sprintf("remove the %d unknown containers", len(unknown)),
				Command: "crictl ps -a --state unknown -q" + batch + "crictl rm -f"})
		case len(unknown) > 0:
			steps = append(steps, removeByID("remove the %d unknown containers", "crictl rm -f", unknown, "unknown containers", "crictl ps -a --state unknown")...)
		}
	}
	if top := r.NSBytes; len(top) > 0 && top[0].Fraction > 0.3 {
		if validNamespace(top[0].Name) {
			steps = append(steps, Step{Why: fmt.Sprintf("namespace %s holds %.0f%% of the ListContainers bytes: fix its cleanup (Job ttlSecondsAfterFinished, CronJob history limits, the crash loop)",
				top[0].Name, 100*top[0].Fraction), Command: "kubectl -n " + shellQuote(top[0].Name) + " get jobs,cronjobs,pods"})
		} else {
			steps = append(steps, Step{Why: fmt.Sprintf("namespace %q holds %.0f%% of the ListContainers bytes; %s: the kubelet did not create these containers, look at them with crictl ps -a",
				top[0].Name, 100*top[0].Fraction, leftOut)})
		}
	}
	steps = append(steps, Step{Why: "let the node take pods again once the alerts resolve", Command: "kubectl uncordon NODE"})
	return steps
}

// removeByID removes the listed containers by ID, the valid IDs only; why
// has a %d for their number. The others get a step of their own that says
// they were left out and how to look at them.
func removeByID(why, command string, ids []string, what, inspect string) []Step {
	var valid []string
	for _, id := range ids {
		if validID(id) {
			valid = append(valid, id)
		}
	}
	var steps []Step
	if len(valid) > 0 {
		steps = append(steps, Step{Why: fmt.Sprintf(why, len(valid)), Command: command + " " + shellQuoteAll(valid)})
	}
	if n := len(ids) - len(valid); n > 0 {
		steps = append(steps, Step{Why: fmt.Sprintf("%d %s have an ID that is not a valid container ID (lowercase hex), so no command names them: left out; look at them with %s", n, what, inspect)})
	}
	return steps
}

// leftOut is what a step without a command says of the name it would have
// printed.
const leftOut = "it is not a valid Kubernetes name, so no command names it"

// exitedSteps removes the exited containers of a CRI runtime through lists
// crictl can read: all at once when their list fits under the limit,
// otherwise namespace by namespace, and a namespace too large on its own pod
// by pod (the kubelet's labels are server-side filters, so each list holds
// only what it names).
func exitedSteps(inv *kubecontainer.Inventory, exited int, limit int64) []Step {
	fits := func(b int64) bool { return float64(b) <= crictlMargin*float64(limit) }
	type group struct {
		name  string
		n     int
		bytes int64
	}
	var total int64
	byNS := map[string]*group{}
	byPod := map[string]map[string]*group{}
	for _, c := range inv.Containers {
		if c.State != kubecontainer.ContainerExited {
			continue
		}
		total += c.Bytes
		g := byNS[c.Namespace]
		if g == nil {
			g = &group{name: c.Namespace}
			byNS[c.Namespace] = g
			byPod[c.Namespace] = map[string]*group{}
		}
		g.n++
		g.bytes += c.Bytes
		p := byPod[c.Namespace][c.Pod]
		if p == nil {
			p = &group{name: c.Pod}
			byPod[c.Namespace][c.Pod] = p
		}
		p.n++
		p.bytes += c.Bytes
	}
	const rm = "crictl rm"
	if fits(total) {
		return []Step{{Why: fmt.Sprintf("remove the %d exited containers (the kubelet needs none of them to run pods)", exited),
			Command: "crictl ps -a --state exited -q" + batch + rm}}
	}
	sorted := func(m map[string]*group) []*group {
		gs := make([]*group, 0, len(m))
		for _, g := range m {
			gs = append(gs, g)
		}
		sort.Slice(gs, func(i, j int) bool {
			if gs[i].bytes != gs[j].bytes {
				return gs[i].bytes > gs[j].bytes
			}
			return gs[i].name < gs[j].name
		})
		return gs
	}
	label := func(key, value string) string { return " --label " + key + "=" + shellQuote(value) }
	var steps []Step
	left := 0
	for _, ns := range sorted(byNS) {
		if len(steps) >= maxListSteps {
			left += ns.n
			continue
		}
		if !validNamespace(ns.name) {
			steps = append(steps, Step{Why: fmt.Sprintf("namespace %q: %s; its %d exited containers (%s) are left out (the kubelet did not create them), look at them with crictl ps -a --state exited",
				ns.name, leftOut, ns.n, size(ns.bytes))})
			continue
		}
		nsLabel := label("io.kubernetes.pod.namespace", ns.name)
		if fits(ns.bytes) {
			steps = append(steps, Step{Why: fmt.Sprintf("remove the %d exited containers of namespace %s (%s)", ns.n, ns.name, size(ns.bytes)),
				Command: "crictl ps -a --state exited" + nsLabel + " -q" + batch + rm})
			continue
		}
		for _, pod := range sorted(byPod[ns.name]) {
			if len(steps) >= maxListSteps {
				left += pod.n
				continue
			}
			if !validPodName(pod.name) {
				steps = append(steps, Step{Why: fmt.Sprintf("pod %q of namespace %s: %s; its %d exited containers (%s) are left out (the kubelet did not create them), look at them with crictl ps -a --state exited",
					pod.name, ns.name, leftOut, pod.n, size(pod.bytes))})
				continue
			}
			steps = append(steps, Step{Why: fmt.Sprintf("remove the %d exited containers of pod %s/%s (%s)", pod.n, ns.name, pod.name, size(pod.bytes)),
				Command: "crictl ps -a --state exited" + nsLabel + label("io.kubernetes.pod.name", pod.name) + " -q" + batch + rm})
		}
	}
	steps[0].Why = fmt.Sprintf("the %d exited containers list to %s, too large for crictl to read at once (its limit is the kubelet's): ", exited, size(total)) + steps[0].Why
	if left > 0 {
		steps = append(steps, Step{Why: fmt.Sprintf("then list again: %d more exited containers are left for the next report", left),
			Command: "pleg_exporter diagnose"})
	}
	return steps
}

// JSON writes the report as indented JSON. Names are as the runtime gave
// them: encoding/json escapes controls and writes invalid UTF-8 as U+FFFD.
func (r *Report) JSON(w io.Writer) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(r)
}

// Text writes the report for a person.
// Every line goes through Printable: names, reasons and errors come from the
// runtime and must not reach the terminal as escapes or controls.
func (r *Report) Text(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintln(w, kubecontainer.Printable(fmt.Sprintf(format, a...))) }
	p("pleg_exporter diagnose: %s %s at %s, %s", r.Runtime.Runtime, r.Runtime.Version, r.Runtime.Endpoint, r.Time.Format(time.RFC3339))
	p("")
	if r.AtRisk {
		p("AT RISK:")
		for _, s := range r.Reasons {
			p("  - %s", s)
		}
	} else {
		p("Healthy: nothing close to the kubelet's limits.")
	}
	if r.ListError != "" {
		p("The kubelet's unfiltered list fails: %s", r.ListError)
	}
	if r.Fallback {
		p("Counted through filtered lists, past the limit the kubelet cannot read.")
	}
	if r.Incomplete != "" {
		p("Not listed: %s", r.Incomplete)
	}
	p("")
	p("Containers  %s", states(r.Containers, kubecontainer.ContainerStates))
	if r.Docker != nil {
		p("Docker      %s", states(r.Docker, kubecontainer.DockerStates))
	}
	p("Sandboxes   %s", states(r.Sandboxes, kubecontainer.SandboxStates))
	for _, pl := range r.Payload {
		fit := "(no items)"
		if pl.Items > 0 {
			fit = fmt.Sprintf("(~%d more items fit)", max(pl.MoreFit, 0))
		}
		p("Payload     %-15s %10s  %5.1f%% of %s  %s", pl.RPC, size(pl.Bytes), 100*pl.Ratio, size(pl.LimitBytes), fit)
	}
	table := func(title string, rows []Share) {
		if len(rows) == 0 {
			return
		}
		p("")
		p("%s", title)
		p("  %-48s %10s %10s %10s %7s", "", "containers", "exited", "bytes", "share")
		for _, s := range rows {
			p("  %-48s %10d %10d %10s %6.1f%%", s.Name, s.Containers, s.ByState[kubecontainer.ContainerExited], size(s.Bytes), 100*s.Fraction)
		}
	}
	table("Top namespaces by containers", r.Namespaces)
	table("Top namespaces by ListContainers bytes", r.NSBytes)
	table("Top pods by containers", r.Pods)
	table("Top pods by ListContainers bytes", r.PodBytes)
	suspects := func(title string, rows []Suspect, total int) {
		if total == 0 {
			return
		}
		p("")
		p("%s (%d)", title, total)
		for _, s := range rows {
			p("  %-13s %-60s %-24s %s", short(s.ID), s.Where, s.State, s.Age)
		}
	}
	suspects("Unknown or dead containers, oldest first", r.Suspects[:min(len(r.Suspects), 20)], len(r.Suspects))
	suspects("Notready sandboxes, oldest first", r.NotReady, r.NotReadyAll)
	if len(r.Probes) > 0 {
		p("")
		p("Slowest status calls")
		for _, pr := range r.Probes {
			p("  %-9s %-13s %-50s %8s  %s", pr.Kind, short(pr.ID), pr.Where, pr.Duration, pr.Result)
		}
	}
	if len(r.StatusFailures) > 0 {
		p("")
		p("Pods whose status calls fail (the kubelet's relist waits on each; runbook: PLEGStatusCallHanging)")
		for _, f := range r.StatusFailures {
			p("  %-50s %s %s: %s after %s", f.Pod, f.RPC, short(f.ID), f.Code, f.Duration)
			p("    %s", f.Error)
			for _, l := range f.Look {
				p("    $ %s", l)
			}
		}
	}
	if r.Inspected > 0 || r.NotInspected > 0 {
		p("")
		p("Status of %d pods inspected as the kubelet does (%d failed, %d not reached)", r.Inspected, len(r.StatusFailures), r.NotInspected)
	}
	if g := r.GC; g != nil {
		p("")
		p("Fix first: remove what the kubelet's own container GC would, through lists that fit")
		fits := "fits under the limit"
		if !g.Fits {
			fits = "STILL OVER THE LIMIT"
		}
		who := "The kubelet's own policy"
		if g.Policy == gc.PolicyFinishedPods {
			who = "With --finished-pods it"
		}
		p("  %s removes %d containers and %d sandboxes: ListContainers %s → %s (%s).", who, g.Containers, g.Sandboxes,
			size(g.Before[kubecontainer.RPCListContainers]), size(g.After[kubecontainer.RPCListContainers]), fits)
		p("  %s.", capitalize(g.Why))
		if g.FinishedPods > 0 {
			p("  It removes %d pods that have no ready sandbox, and with them their logs.", g.FinishedPods)
		}
		p("  See the plan per namespace (changes nothing):  %s", g.DryRun)
		p("  Apply it:                                       %s", g.Command)
	}
	p("")
	if r.GC != nil {
		p("Or by hand")
	} else {
		p("Cleanup")
	}
	for i, s := range r.Cleanup {
		p("  %d. %s", i+1, s.Why)
		if s.Command != "" {
			p("     %s", s.Command)
		}
		if s.Warning != "" {
			p("     WARNING: %s", s.Warning)
		}
	}
}

func short(id string) string {
	if len(id) > 13 {
		return id[:13]
	}
	return id
}

var states = gc.States
