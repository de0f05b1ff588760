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

package diagnose

import (
	"fmt"
	"sort"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

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
	total, byNS, byPod := exitedGroups(inv)
	const rm = "crictl rm"
	if fits(total) {
		return []Step{{Why: fmt.Sprintf("remove the %d exited containers (the kubelet needs none of them to run pods)", exited),
			Command: "crictl ps -a --state exited -q" + batch + rm}}
	}
	label := func(key, value string) string { return " --label " + key + "=" + shellQuote(value) }
	var steps []Step
	left := 0
	for _, ns := range largestFirst(byNS) {
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
		for _, pod := range largestFirst(byPod[ns.name]) {
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

// group is the exited containers of a namespace or a pod.
type group struct {
	name  string
	n     int
	bytes int64
}

// exitedGroups sums the exited containers, by namespace and by pod of each
// namespace.
func exitedGroups(inv *kubecontainer.Inventory) (total int64, byNS map[string]*group, byPod map[string]map[string]*group) {
	byNS, byPod = map[string]*group{}, map[string]map[string]*group{}
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
	return total, byNS, byPod
}

// largestFirst orders groups by bytes, then by name.
func largestFirst(m map[string]*group) []*group {
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
