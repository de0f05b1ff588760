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

// Package gc plans and applies `pleg_exporter gc`: the kubelet's own
// container garbage collection (pkg/kubelet/kuberuntime/kuberuntime_gc.go),
// computed from an inventory the lister read through answers that fit, so it
// works past the 16 MiB limit where the kubelet's GC fails with the same
// ResourceExhausted as its relist. Planning is pure (an inventory in, a plan
// out); applying takes a kubecontainer.Remover.
package gc

import (
	"sort"
	"time"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// Policy is the kubelet's GC policy, plus what the kubelet decides from the
// API server and this command cannot see.
type Policy struct {
	// KeepPerContainer is how many not-running containers of each (pod,
	// container name) stay, newest first: the kubelet's MaxPerPodContainer
	// (--maximum-dead-containers-per-container, default 1).
	KeepPerContainer int `json:"keep_per_container"`
	// FinishedPods also removes every pod whose sandboxes are all not
	// ready, containers and sandboxes, as the kubelet does for pods deleted
	// from the API server.
	FinishedPods bool `json:"finished_pods"`
	// MinAge spares containers younger than this: the kubelet's MinAge
	// (--minimum-container-ttl-duration, default 0).
	MinAge time.Duration `json:"min_age_ns"`
	// UntilRatio > 0 stops, oldest first, once both list answers are under
	// UntilRatio × LimitBytes.
	UntilRatio float64 `json:"until_ratio"`
	// LimitBytes is the kubelet's gRPC receive limit.
	LimitBytes int64 `json:"limit_bytes"`
}

// Why an item is removed.
const (
	// RuleOlderAttempt: a not-running container past the newest
	// KeepPerContainer of its (pod, name).
	RuleOlderAttempt = "older-attempt"
	// RuleFinishedPod: a not-running container or a sandbox of a pod
	// without a ready sandbox (--finished-pods).
	RuleFinishedPod = "finished-pod"
	// RuleOldSandbox: a not-ready sandbox that holds no container and is
	// not the newest of its pod.
	RuleOldSandbox = "old-sandbox"
	// RuleDead: a container Docker marks dead (or still "removing"), a
	// removal that failed half way; the kubelet sees it as unknown and
	// removes it unless it is its group's newest, this always. Docker
	// runtimes only.
	RuleDead = "dead"
)

// Kinds of Action.
const (
	KindContainer = "container"
	KindSandbox   = "sandbox"
)

// Action is one removal.
type Action struct {
	Kind      string    `json:"kind"`
	ID        string    `json:"id"`
	Namespace string    `json:"namespace"`
	Pod       string    `json:"pod"`
	PodUID    string    `json:"pod_uid"`
	SandboxID string    `json:"sandbox_id,omitempty"` // a container's sandbox
	Name      string    `json:"name,omitempty"`       // container name
	Attempt   uint32    `json:"attempt"`
	State     string    `json:"state"`
	Rule      string    `json:"rule"`
	CreatedAt time.Time `json:"created_at"`
	// Bytes is what the item adds to its list answer (ListContainers for
	// a container, ListPodSandbox for a sandbox).
	Bytes int64 `json:"bytes"`
	// key orders the removals: oldest first, a sandbox after its
	// containers.
	key time.Time
}

// RPC is the list answer the action makes smaller.
func (a *Action) RPC() string {
	if a.Kind == KindSandbox {
		return kubecontainer.RPCListPodSandbox
	}
	return kubecontainer.RPCListContainers
}

// Kept counts what the policy leaves, and why.
type Kept struct {
	Running int `json:"running_containers"`
	// UnknownUnsure: unknown containers on cri-dockerd without Docker's
	// view, which cannot tell a dead container from a restarting one.
	UnknownUnsure int `json:"unknown_without_docker_view"`
	// SandboxesUnchecked: sandboxes kept because the listing missed
	// containers (Inventory.Incomplete) or went through the Docker API,
	// which cannot remove cri-dockerd's checkpoint of a sandbox.
	SandboxesUnchecked int `json:"sandboxes_not_removable_here"`
	Newest             int `json:"newest_of_their_group"`
	NotKubelets        int `json:"not_created_by_the_kubelet"`
	Young              int `json:"younger_than_min_age"`
	LiveInDocker       int `json:"live_in_docker"`
	ReadySandbox       int `json:"ready_sandboxes"`
	ActiveSandbox      int `json:"sandboxes_holding_containers"`
	NewestSandbox      int `json:"newest_sandbox_of_their_pod"`
	UntilRatio         int `json:"left_by_until_ratio"`
}

// Plan is what a policy removes from one inventory, in the order it is
// removed.
type Plan struct {
	Policy  Policy   `json:"policy"`
	Actions []Action `json:"actions"`
	Kept    Kept     `json:"kept"`
	// Before is each answer's size now, After what is left once every
	// action is done.
	Before map[string]int64 `json:"before_bytes"`
	After  map[string]int64 `json:"after_bytes"`
}

// Payloads are the sizes of the two list answers of an inventory: the
// runtime's exact answer (or the size its error gave), else the sum of the
// items, which is the answer's size (an answer is nothing but its items).
func Payloads(inv *kubecontainer.Inventory) map[string]int64 {
	sum := map[string]int64{}
	for _, c := range inv.Containers {
		if c.State != kubecontainer.ContainerDockerOnly {
			sum[kubecontainer.RPCListContainers] += c.Bytes
		}
	}
	for _, s := range inv.Sandboxes {
		sum[kubecontainer.RPCListPodSandbox] += s.Bytes
	}
	for rpc, b := range inv.Payload {
		if b > 0 {
			sum[rpc] = b
		}
	}
	return sum
}

// liveInDocker are Docker states of a container that is alive whatever the
// CRI view says (cri-dockerd reports restarting as unknown): removing it
// would need force. "removing" is not among them: after a removal that
// failed Docker keeps listing the container as removing (until it
// restarts) and a new removal is what it needs, as for dead.
var liveInDocker = map[string]bool{
	kubecontainer.DockerRunning:    true,
	kubecontainer.DockerPaused:     true,
	kubecontainer.DockerRestarting: true,
}

// Build plans what p removes from inv, as of now.
//
// The kubelet's rules (v1.37 kuberuntime_gc.go), in its order:
//  1. containers: every container that is not running and was created
//     before now − MinAge is evictable; grouped by (pod UID, container
//     name), the newest KeepPerContainer of each group stay, unless the
//     pod is to be removed (here: --finished-pods and no ready sandbox),
//     then none;
//  2. sandboxes, against the containers left after step 1: a sandbox that
//     is ready or still holds a container is active; of each pod's
//     sandboxes, newest first, the oldest len−1 (len for a removed pod)
//     are removed if not active.
//
// Where this differs, it is on the safe side: a container without the
// kubelet's pod UID label is never touched (the kubelet would group it
// under the empty UID of a pod it does not know and remove it); a Docker
// container that Docker says is alive is never touched.
func Build(inv *kubecontainer.Inventory, p Policy, now time.Time) *Plan {
	b := newPlanner(inv, p)
	b.containers(now)
	b.sandboxes()
	plan := b.plan
	// Oldest first; a sandbox sorts after each of its containers (its key
	// is at least theirs, and containers go first on a tie).
	sort.SliceStable(plan.Actions, func(i, j int) bool {
		a, b := &plan.Actions[i], &plan.Actions[j]
		if !a.key.Equal(b.key) {
			return a.key.Before(b.key)
		}
		if a.Kind != b.Kind {
			return a.Kind == KindContainer
		}
		return a.ID < b.ID
	})
	plan.untilRatio()
	for rpc, b := range plan.Before {
		plan.After[rpc] = b
	}
	for _, a := range plan.Actions {
		plan.After[a.RPC()] -= a.Bytes
	}
	return plan
}

// planner holds what Build learns of the inventory while it plans.
type planner struct {
	inv                 *kubecontainer.Inventory
	policy              Policy
	plan                *Plan
	readyPod, listedPod map[string]bool
	running             map[string]bool // container ids listed as running at least once
	remaining           map[string]int  // sandbox id -> containers left in it
}

func newPlanner(inv *kubecontainer.Inventory, p Policy) *planner {
	b := &planner{inv: inv, policy: p, plan: &Plan{Policy: p, Before: Payloads(inv), After: map[string]int64{}, Actions: []Action{}},
		readyPod: map[string]bool{}, listedPod: map[string]bool{}, running: map[string]bool{}, remaining: map[string]int{}}
	for _, s := range inv.Sandboxes {
		b.listedPod[s.PodUID] = true
		if s.State == kubecontainer.SandboxReady {
			b.readyPod[s.PodUID] = true
		}
	}
	// A container listed twice (it changed state between two per-state
	// lists of the fallback) counts once, as running if it ran in either.
	for _, c := range inv.Containers {
		if c.State == kubecontainer.ContainerRunning {
			b.running[c.ID] = true
		}
	}
	return b
}

// finished says whether the pod is one --finished-pods removes: it has
// sandboxes and none is ready. A pod with no listed sandbox may be one
// created after the sandboxes were listed: not finished.
func (b *planner) finished(uid string) bool {
	return b.policy.FinishedPods && b.listedPod[uid] && !b.readyPod[uid]
}

func (b *planner) removeContainer(c *kubecontainer.Container, rule string) {
	b.plan.Actions = append(b.plan.Actions, Action{Kind: KindContainer, ID: c.ID, Namespace: c.Namespace, Pod: c.Pod, PodUID: c.PodUID,
		SandboxID: c.SandboxID, Name: c.Name, Attempt: c.Attempt, State: c.State, Rule: rule, CreatedAt: c.CreatedAt, Bytes: c.Bytes, key: c.CreatedAt})
}

// containers plans step 1: the containers, as the kubelet's
// evictContainers does, newest --keep-per-container of each (pod, name)
// kept.
func (b *planner) containers(now time.Time) {
	// cri-dockerd reports a container Docker restarts as unknown, like a
	// dead one; only Docker's own view tells them apart.
	unsureUnknown := b.inv.Info.Runtime == "docker" && b.inv.View == kubecontainer.ViewCRI
	type unit struct{ uid, name string }
	units := map[unit][]*kubecontainer.Container{}
	seen := map[string]bool{}
	kept := &b.plan.Kept
	newestGC := now.Add(-b.policy.MinAge)
	for i := range b.inv.Containers {
		c := &b.inv.Containers[i]
		if c.State == kubecontainer.ContainerDockerOnly || seen[c.ID] {
			continue // not the kubelet's (not in its lists either), or listed twice
		}
		seen[c.ID] = true
		switch {
		case c.PodUID == "":
			kept.NotKubelets++
		case c.State == kubecontainer.ContainerRunning || b.running[c.ID]:
			kept.Running++
		case liveInDocker[c.DockerState]:
			kept.LiveInDocker++
		case unsureUnknown && c.State == kubecontainer.ContainerUnknown:
			kept.UnknownUnsure++
		case b.policy.MinAge > 0 && c.CreatedAt.After(newestGC):
			kept.Young++
		case c.DockerState == kubecontainer.DockerDead || c.DockerState == kubecontainer.DockerRemoving:
			b.removeContainer(c, RuleDead)
			continue
		case b.finished(c.PodUID):
			b.removeContainer(c, RuleFinishedPod)
			continue
		default:
			k := unit{c.PodUID, c.Name}
			units[k] = append(units[k], c)
			continue
		}
		b.remaining[c.SandboxID]++
	}
	for _, cs := range units {
		sort.SliceStable(cs, func(i, j int) bool { return newerContainer(cs[i], cs[j]) })
		for i, c := range cs {
			if i < b.policy.KeepPerContainer {
				kept.Newest++
				b.remaining[c.SandboxID]++
				continue
			}
			b.removeContainer(c, RuleOlderAttempt)
		}
	}
}

// sandboxes plans step 2: the sandboxes left empty by step 1, all but the
// newest of each pod (none of a finished pod's).
func (b *planner) sandboxes() {
	kept := &b.plan.Kept
	byPod := map[string][]*kubecontainer.Sandbox{}
	for i := range b.inv.Sandboxes {
		s := &b.inv.Sandboxes[i]
		if s.PodUID == "" {
			kept.NotKubelets++
			continue
		}
		byPod[s.PodUID] = append(byPod[s.PodUID], s)
	}
	lastOf := map[string]time.Time{} // sandbox id -> newest of its removed containers
	for _, a := range b.plan.Actions {
		if a.CreatedAt.After(lastOf[a.SandboxID]) {
			lastOf[a.SandboxID] = a.CreatedAt
		}
	}
	// A listing that missed containers (the runtime rejected a state
	// filter) cannot tell an empty sandbox: removing one would take the
	// missed containers with it. Nor can a remover that would leave half a
	// sandbox behind (the Docker API: cri-dockerd's checkpoint stays).
	keepAll := b.inv.Incomplete != "" || b.inv.DockerAPI
	for uid, sbs := range byPod {
		if keepAll {
			kept.SandboxesUnchecked += len(sbs)
			continue
		}
		sort.SliceStable(sbs, func(i, j int) bool { return newerSandbox(sbs[i], sbs[j]) })
		keep := 1
		if b.finished(uid) {
			keep = 0
		}
		for i, s := range sbs {
			switch {
			case s.State == kubecontainer.SandboxReady:
				kept.ReadySandbox++
			case b.remaining[s.ID] > 0:
				kept.ActiveSandbox++
			case i < keep:
				kept.NewestSandbox++
			default:
				rule := RuleOldSandbox
				if keep == 0 {
					rule = RuleFinishedPod
				}
				key := s.CreatedAt
				if t := lastOf[s.ID]; t.After(key) {
					key = t
				}
				b.plan.Actions = append(b.plan.Actions, Action{Kind: KindSandbox, ID: s.ID, Namespace: s.Namespace, Pod: s.Pod, PodUID: s.PodUID,
					Attempt: s.Attempt, State: s.State, Rule: rule, CreatedAt: s.CreatedAt, Bytes: s.Bytes, key: key})
			}
		}
	}
}

// untilRatio cuts the plan after the first removal that brings both
// answers under UntilRatio × LimitBytes.
func (p *Plan) untilRatio() {
	r := p.Policy.UntilRatio
	if r <= 0 {
		return
	}
	target := r * float64(p.Policy.LimitBytes)
	left := map[string]int64{}
	for rpc, b := range p.Before {
		left[rpc] = b
	}
	under := func() bool {
		for _, b := range left {
			if float64(b) >= target {
				return false
			}
		}
		return true
	}
	n := 0
	for n < len(p.Actions) && !under() {
		left[p.Actions[n].RPC()] -= p.Actions[n].Bytes
		n++
	}
	p.Kept.UntilRatio = len(p.Actions) - n
	p.Actions = p.Actions[:n]
}

// newerContainer orders a group newest first, as the kubelet's byCreated;
// the attempt and then the id break ties so that every run keeps the same
// one.
func newerContainer(a, b *kubecontainer.Container) bool {
	return newer(a.CreatedAt, b.CreatedAt, a.Attempt, b.Attempt, a.ID, b.ID)
}

func newerSandbox(a, b *kubecontainer.Sandbox) bool {
	return newer(a.CreatedAt, b.CreatedAt, a.Attempt, b.Attempt, a.ID, b.ID)
}

func newer(ta, tb time.Time, aa, ab uint32, ida, idb string) bool {
	if !ta.Equal(tb) {
		return ta.After(tb)
	}
	if aa != ab {
		return aa > ab
	}
	return ida > idb
}
