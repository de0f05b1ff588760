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
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func at(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }

type node struct{ inv kubecontainer.Inventory }

func (n *node) sandbox(id, ns, pod, uid, state string, created int) {
	n.inv.Sandboxes = append(n.inv.Sandboxes, kubecontainer.Sandbox{ID: id, Namespace: ns, Pod: pod, PodUID: uid, State: state, CreatedAt: at(created), Bytes: 100})
}

func (n *node) container(id, sandbox, name, state string, attempt uint32, created int) *kubecontainer.Container {
	c := kubecontainer.Container{ID: id, Name: name, Attempt: attempt, State: state, CreatedAt: at(created), Bytes: 1000, SandboxID: sandbox}
	for _, s := range n.inv.Sandboxes {
		if s.ID == sandbox {
			c.Namespace, c.Pod, c.PodUID = s.Namespace, s.Pod, s.PodUID
		}
	}
	n.inv.Containers = append(n.inv.Containers, c)
	return &n.inv.Containers[len(n.inv.Containers)-1]
}

const (
	ready    = kubecontainer.SandboxReady
	notready = kubecontainer.SandboxNotReady
	running  = kubecontainer.ContainerRunning
	exited   = kubecontainer.ContainerExited
	created  = kubecontainer.ContainerCreated
	unknown  = kubecontainer.ContainerUnknown
)

// A node with every case the kubelet's policy tells apart.
func fixture() *kubecontainer.Inventory {
	n := &node{}
	// Pod a: restarted twice (sandbox a0 then a1, ready), main crash-looping.
	n.sandbox("a0", "web", "api", "uid-a", notready, 0)
	n.sandbox("a1", "web", "api", "uid-a", ready, 10)
	n.container("a-main-0", "a0", "main", exited, 0, 1)
	n.container("a-main-1", "a0", "main", exited, 1, 2)
	n.container("a-init-0", "a1", "init", exited, 0, 11)
	n.container("a-main-2", "a1", "main", exited, 2, 12)
	n.container("a-main-3", "a1", "main", running, 3, 13)
	// Pod b: a finished Job pod, two sandboxes, one attempt in each.
	n.sandbox("b0", "jobs", "cron-1", "uid-b", notready, 3)
	n.sandbox("b1", "jobs", "cron-1", "uid-b", notready, 5)
	n.container("b-job-0", "b0", "job", exited, 0, 4)
	n.container("b-job-1", "b1", "job", created, 1, 6)
	// Pod d: no ready sandbox, yet a container runs in it.
	n.sandbox("d0", "jobs", "stuck", "uid-d", notready, 7)
	n.container("d-run", "d0", "worker", running, 0, 8)
	n.container("d-old", "d0", "worker", exited, 0, 7)
	// Not the kubelet's: no pod uid.
	n.container("other", "", "nerdctl-thing", exited, 0, 0)
	return &n.inv
}

func ids(p *Plan) map[string]string {
	m := map[string]string{}
	for _, a := range p.Actions {
		m[a.ID] = a.Rule
	}
	return m
}

func TestKubeletPolicy(t *testing.T) {
	p := Build(fixture(), Policy{KeepPerContainer: 1, LimitBytes: 1 << 20}, at(60))
	want := map[string]string{
		"a-main-0": RuleOlderAttempt, "a-main-1": RuleOlderAttempt, // a-main-2 is the newest not running
		"a0":      RuleOldSandbox,                         // emptied, not the newest
		"b-job-0": RuleOlderAttempt, "b0": RuleOldSandbox, // b1 holds the newest job: active
	}
	if got := ids(p); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("plan = %v\nwant   %v", got, want)
	}
	k := p.Kept
	if k.Running != 2 || k.Newest != 4 || k.NotKubelets != 1 || k.ReadySandbox != 1 || k.ActiveSandbox != 2 {
		t.Errorf("kept = %+v", k)
	}
	checkOrder(t, p)
	if got, want := p.After[kubecontainer.RPCListContainers], p.Before[kubecontainer.RPCListContainers]-3000; got != want {
		t.Errorf("ListContainers after = %d, want %d", got, want)
	}
	if got, want := p.After[kubecontainer.RPCListPodSandbox], p.Before[kubecontainer.RPCListPodSandbox]-200; got != want {
		t.Errorf("ListPodSandbox after = %d, want %d", got, want)
	}
}

func TestFinishedPods(t *testing.T) {
	p := Build(fixture(), Policy{KeepPerContainer: 1, FinishedPods: true, LimitBytes: 1 << 20}, at(60))
	want := map[string]string{
		"a-main-0": RuleOlderAttempt, "a-main-1": RuleOlderAttempt, "a0": RuleOldSandbox,
		// Pod b has no ready sandbox: everything goes.
		"b-job-0": RuleFinishedPod, "b-job-1": RuleFinishedPod, "b0": RuleFinishedPod, "b1": RuleFinishedPod,
		// Pod d: its running container stays, and so does its sandbox;
		// the exited one goes.
		"d-old": RuleFinishedPod,
	}
	if got := ids(p); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("plan = %v\nwant   %v", got, want)
	}
	checkOrder(t, p)
}

func TestKeepMoreOrNone(t *testing.T) {
	p := Build(fixture(), Policy{KeepPerContainer: 2, LimitBytes: 1 << 20}, at(60))
	if got := ids(p); fmt.Sprint(got) != fmt.Sprint(map[string]string{"a-main-0": RuleOlderAttempt}) {
		t.Errorf("keep 2: %v", got)
	}
	p = Build(fixture(), Policy{KeepPerContainer: 0, LimitBytes: 1 << 20}, at(60))
	for _, id := range []string{"a-init-0", "a-main-2", "b-job-1", "d-old", "b0", "b1", "a0"} {
		if _, ok := ids(p)[id]; !ok && id != "b1" {
			t.Errorf("keep 0: %s not removed: %v", id, ids(p))
		}
	}
	// b1 is the newest sandbox of a pod the kubelet would keep.
	if _, ok := ids(p)["b1"]; ok {
		t.Error("keep 0 removed the newest sandbox of a pod that is not finished")
	}
}

func TestMinAge(t *testing.T) {
	// At minute 12.5 with a 5 minute min age, containers created after
	// minute 7.5 stay.
	p := Build(fixture(), Policy{KeepPerContainer: 1, MinAge: 5 * time.Minute, LimitBytes: 1 << 20}, at(12).Add(30*time.Second))
	for id := range ids(p) {
		if id == "a-main-2" || id == "a-init-0" {
			t.Errorf("%s is younger than the min age", id)
		}
	}
	if p.Kept.Young == 0 {
		t.Errorf("kept = %+v", p.Kept)
	}
}

func TestDockerStates(t *testing.T) {
	n := &node{}
	n.sandbox("e0", "web", "e", "uid-e", ready, 0)
	n.container("e-dead", "e0", "app", unknown, 1, 2).DockerState = kubecontainer.DockerDead
	n.container("e-restarting", "e0", "side", unknown, 0, 1).DockerState = kubecontainer.DockerRestarting
	n.container("e-old", "e0", "app", exited, 0, 1).DockerState = kubecontainer.DockerExited
	// Listed as removing after a removal that failed: removed again.
	n.container("e-stuck", "e0", "sidecar", unknown, 0, 1).DockerState = kubecontainer.DockerRemoving
	n.inv.Containers = append(n.inv.Containers, kubecontainer.Container{ID: "not-kubelets-dead", State: kubecontainer.ContainerDockerOnly, DockerState: kubecontainer.DockerDead})
	p := Build(&n.inv, Policy{KeepPerContainer: 1, LimitBytes: 1 << 20}, at(60))
	// The dead one goes although it is the newest of (e, app); so the
	// exited attempt 0 is then app's newest and stays.
	want := map[string]string{"e-dead": RuleDead, "e-stuck": RuleDead}
	if got := ids(p); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("plan = %v, want %v", got, want)
	}
	if p.Kept.LiveInDocker != 1 {
		t.Errorf("kept = %+v", p.Kept)
	}
}

// Each sandbox comes after every one of its containers; otherwise oldest
// first.
func checkOrder(t *testing.T, p *Plan) {
	t.Helper()
	pos := map[string]int{}
	for i, a := range p.Actions {
		pos[a.ID] = i
	}
	for i, a := range p.Actions {
		if a.Kind == KindContainer {
			if j, ok := pos[a.SandboxID]; ok && j < i {
				t.Errorf("sandbox %s removed before its container %s", a.SandboxID, a.ID)
			}
		}
		if i > 0 && a.key.Before(p.Actions[i-1].key) {
			t.Errorf("%s (%s) after %s (%s): not oldest first", a.ID, a.key, p.Actions[i-1].ID, p.Actions[i-1].key)
		}
	}
}

func TestUntilRatio(t *testing.T) {
	n := &node{}
	n.sandbox("s", "ns", "p", "uid", ready, 0)
	for i := 0; i < 10; i++ {
		n.container(fmt.Sprintf("c%d", i), "s", "job", exited, uint32(i), i)
	}
	n.inv.Payload = map[string]int64{kubecontainer.RPCListContainers: 10000, kubecontainer.RPCListPodSandbox: 100}
	// Limit 10000, ratio 0.65: the answer must drop below 6500, so the
	// four oldest go (10000 → 6000) and the rest stay.
	p := Build(&n.inv, Policy{KeepPerContainer: 1, UntilRatio: 0.65, LimitBytes: 10000}, at(60))
	var got []string
	for _, a := range p.Actions {
		got = append(got, a.ID)
	}
	if strings.Join(got, ",") != "c0,c1,c2,c3" || p.Kept.UntilRatio != 5 || p.After[kubecontainer.RPCListContainers] != 6000 {
		t.Errorf("plan %v, kept %+v, after %v", got, p.Kept, p.After)
	}
	// Already under: nothing.
	p = Build(&n.inv, Policy{KeepPerContainer: 1, UntilRatio: 2, LimitBytes: 10000}, at(60))
	if len(p.Actions) != 0 {
		t.Errorf("under the ratio already, planned %d", len(p.Actions))
	}
}

// Planning again on what a partial run left plans exactly the rest: the
// property that makes an interrupted run, run again, equal one run.
func TestReplanAfterPartialRun(t *testing.T) {
	for _, finished := range []bool{false, true} {
		pol := Policy{KeepPerContainer: 1, FinishedPods: finished, LimitBytes: 1 << 20}
		full := Build(fixture(), pol, at(60))
		for cut := 0; cut <= len(full.Actions); cut++ {
			inv := fixture()
			done := map[string]bool{}
			for _, a := range full.Actions[:cut] {
				done[a.ID] = true
			}
			inv.Containers = filter(inv.Containers, func(c kubecontainer.Container) bool { return !done[c.ID] })
			inv.Sandboxes = filter(inv.Sandboxes, func(s kubecontainer.Sandbox) bool { return !done[s.ID] })
			rest := Build(inv, pol, at(60))
			var want, got []string
			for _, a := range full.Actions[cut:] {
				want = append(want, a.ID)
			}
			for _, a := range rest.Actions {
				got = append(got, a.ID)
			}
			sort.Strings(want)
			sort.Strings(got)
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("finished=%v, after %d of %d: replanned %v, want %v", finished, cut, len(full.Actions), got, want)
			}
		}
	}
}

func filter[T any](xs []T, keep func(T) bool) []T {
	var out []T
	for _, x := range xs {
		if keep(x) {
			out = append(out, x)
		}
	}
	return out
}

func TestPayloads(t *testing.T) {
	inv := fixture()
	p := Payloads(inv)
	if p[kubecontainer.RPCListContainers] != 10000 || p[kubecontainer.RPCListPodSandbox] != 500 {
		t.Errorf("from the items: %v", p)
	}
	inv.Payload = map[string]int64{kubecontainer.RPCListContainers: 17868072}
	if p := Payloads(inv); p[kubecontainer.RPCListContainers] != 17868072 || p[kubecontainer.RPCListPodSandbox] != 500 {
		t.Errorf("from the runtime: %v", p)
	}
}

// What the listing could not see, or the remover cannot do, keeps the
// sandboxes; a pod whose sandbox was not listed is not finished; a
// container listed twice counts as running if it ran in either list.
func TestWhatThePlanCannotKnow(t *testing.T) {
	inv := fixture()
	inv.Incomplete = "unknown containers (the runtime rejects the state filter)"
	p := Build(inv, Policy{KeepPerContainer: 1, FinishedPods: true, LimitBytes: 1 << 20}, at(60))
	for _, a := range p.Actions {
		if a.Kind == KindSandbox {
			t.Errorf("incomplete listing: sandbox %s planned", a.ID)
		}
	}
	if p.Kept.SandboxesUnchecked != 5 {
		t.Errorf("kept %+v", p.Kept)
	}
	inv = fixture()
	inv.DockerAPI = true
	p = Build(inv, Policy{KeepPerContainer: 1, LimitBytes: 1 << 20}, at(60))
	if n := len(p.Actions); n != 3 { // a-main-0, a-main-1, b-job-0
		t.Errorf("keep sandboxes: %v", ids(p))
	}

	n := &node{}
	n.sandbox("x0", "ns", "new", "uid-x", ready, 0)
	c := n.container("late", "x0", "app", created, 0, 1)
	c.PodUID, c.SandboxID = "uid-late", "not-listed" // its pod's sandbox came after the sandbox list
	n.container("twice", "x0", "job", created, 0, 2)
	n.container("twice", "x0", "job", running, 0, 2)
	p = Build(&n.inv, Policy{KeepPerContainer: 0, FinishedPods: true, LimitBytes: 1 << 20}, at(60))
	if got := ids(p); len(got) != 1 || got["late"] != RuleOlderAttempt {
		// keep 0 removes "late" by the kubelet's rule, never as finished;
		// "twice" runs.
		t.Errorf("plan %v", got)
	}
	if p.Kept.Running != 1 {
		t.Errorf("kept %+v", p.Kept)
	}
}

// cri-dockerd without Docker's view: an unknown container may be one Docker
// restarts; it stays.
func TestUnknownOnCRIDockerdWithoutDocker(t *testing.T) {
	n := &node{}
	n.sandbox("s", "ns", "p", "uid", ready, 0)
	n.container("u0", "s", "app", unknown, 0, 1)
	n.container("u1", "s", "app", unknown, 1, 2)
	n.inv.Info.Runtime, n.inv.View = "docker", kubecontainer.ViewCRI
	if p := Build(&n.inv, Policy{KeepPerContainer: 0, LimitBytes: 1 << 20}, at(60)); len(p.Actions) != 0 || p.Kept.UnknownUnsure != 2 {
		t.Errorf("plan %v kept %+v", ids(p), p.Kept)
	}
	n.inv.Info.Runtime = "containerd"
	if p := Build(&n.inv, Policy{KeepPerContainer: 0, LimitBytes: 1 << 20}, at(60)); len(p.Actions) != 2 {
		t.Errorf("containerd: plan %v", ids(p))
	}
}
