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

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/gc"
	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
)

var (
	buildOnce sync.Once
	binPath   string
	binErr    error
)

// exporterBinary builds cmd/pleg_exporter once for the package's tests.
func exporterBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binPath = filepath.Join(workRoot, "pleg_exporter")
		if out, err := exec.Command("go", "build", "-o", binPath, "../../cmd/pleg_exporter").CombinedOutput(); err != nil {
			binErr = fmt.Errorf("build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// item is one container or sandbox as the runtime lists it.
type item struct {
	sandbox           bool
	id, state, podUID string
	name              string
	attempt           uint32
	sandboxID         string
	created           int64
}

// listAll lists every item with an unrestricted client, per sandbox and
// state so that it works past the 16 MiB limit.
func listAll(t *testing.T, c context.Context, rs runtimeapi.RuntimeServiceClient) map[string]item {
	t.Helper()
	all := map[string]item{}
	sbs, err := rs.ListPodSandbox(c, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatalf("list sandboxes: %v", err)
	}
	for _, s := range sbs.Items {
		all[s.Id] = item{sandbox: true, id: s.Id, state: s.State.String(), podUID: s.Metadata.Uid, attempt: s.Metadata.Attempt, created: s.CreatedAt}
		for _, st := range []runtimeapi.ContainerState{0, 1, 2, 3} {
			cs, err := rs.ListContainers(c, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
				PodSandboxId: s.Id, State: &runtimeapi.ContainerStateValue{State: st}}})
			if err != nil {
				t.Fatalf("list %v in %s: %v", st, s.Id, err)
			}
			for _, ct := range cs.Containers {
				all[ct.Id] = item{id: ct.Id, state: ct.State.String(), podUID: ct.Labels["io.kubernetes.pod.uid"], name: ct.Metadata.Name,
					attempt: ct.Metadata.Attempt, sandboxID: ct.PodSandboxId, created: ct.CreatedAt}
			}
		}
	}
	return all
}

// gcNode is a node past 16 MiB the way the field fills one: crash-looping
// pods whose exited attempts pile up, restarted pods with an old sandbox,
// finished Job pods; with running containers and ready sandboxes beside.
// want is what the kubelet's policy removes, by construction.
type gcNode struct {
	want map[string]bool // ids the kubelet's policy removes
	// finished are the ids only --finished-pods removes as well.
	finished map[string]bool
	keep     map[string]bool // running containers, ready sandboxes, each group's newest
}

func populateGCNode(t *testing.T, c context.Context, pc *testenv.PodClient) *gcNode {
	t.Helper()
	pad := strings.Repeat("p", 64<<10)
	n := &gcNode{want: map[string]bool{}, finished: map[string]bool{}, keep: map[string]bool{}}
	var mu sync.Mutex
	mark := func(m map[string]bool, id string) {
		mu.Lock()
		m[id] = true
		mu.Unlock()
	}
	exited := func(pod *testenv.Pod, name string, attempt uint32, padded bool) string {
		spec := testenv.ContainerSpec{Name: name, Attempt: attempt, Command: []string{"/bin/true"}, Start: true}
		if padded {
			spec.ExtraAnnotations = map[string]string{"example.com/payload": pad}
		}
		id, err := pc.CreateContainer(c, pod, spec)
		if err == nil {
			err = pc.WaitState(c, id, runtimeapi.ContainerState_CONTAINER_EXITED)
		}
		if err != nil {
			t.Error(err)
		}
		return id
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	run := func(f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			f()
		}()
	}
	// 16 crash-looping web pods: a running app, one finished init, twelve
	// exited attempts of job (the newest stays).
	for i := 0; i < 16; i++ {
		run(func() {
			pod, err := pc.RunPod(c, "shop", fmt.Sprintf("web-%d", i))
			if err != nil {
				t.Error(err)
				return
			}
			mark(n.keep, pod.ID)
			mark(n.keep, exited(pod, "init", 0, false))
			for a := uint32(0); a < 12; a++ {
				id := exited(pod, "job", a, true)
				if a < 11 {
					mark(n.want, id)
				} else {
					mark(n.keep, id)
				}
			}
			app, err := pc.CreateContainer(c, pod, testenv.ContainerSpec{Name: "app", Start: true})
			if err != nil {
				t.Error(err)
			}
			mark(n.keep, app)
		})
	}
	// 8 cron pods, each with two sandboxes and six exited workers in each:
	// four were restarted (the new sandbox is ready), four are finished
	// (both not ready).
	for i := 0; i < 8; i++ {
		run(func() {
			old, err := pc.RunPod(c, "batch", fmt.Sprintf("cron-%d", i))
			if err != nil {
				t.Error(err)
				return
			}
			var ids []string
			for a := uint32(0); a < 6; a++ {
				ids = append(ids, exited(old, "worker", a, true))
			}
			if err := pc.StopPod(c, old); err != nil {
				t.Error(err)
			}
			cur, err := pc.NewSandbox(c, old)
			if err != nil {
				t.Error(err)
				return
			}
			for a := uint32(6); a < 12; a++ {
				ids = append(ids, exited(cur, "worker", a, true))
			}
			finished := i%2 == 1
			if finished {
				if err := pc.StopPod(c, cur); err != nil {
					t.Error(err)
				}
			}
			// The kubelet's policy: every worker but the newest, and the
			// old sandbox once it is empty.
			for _, id := range ids[:len(ids)-1] {
				mark(n.want, id)
			}
			mark(n.want, old.ID)
			if finished {
				mark(n.finished, ids[len(ids)-1])
				mark(n.finished, cur.ID)
			} else {
				mark(n.keep, ids[len(ids)-1])
				mark(n.keep, cur.ID)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return n
}

// gcReport is the gc command's JSON output.
type gcReport = gc.Report

func runGC(t *testing.T, bin string, args ...string) (gcReport, int, string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"gc", "--output=json"}, args...)...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	cmd.Run()
	var r gcReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("gc %v: exit %d, %v\nstdout: %s\nstderr: %s", args, cmd.ProcessState.ExitCode(), err, out.String(), stderr.String())
	}
	return r, cmd.ProcessState.ExitCode(), stderr.String()
}

func ids(actions []gc.Action) map[string]bool {
	m := map[string]bool{}
	for _, a := range actions {
		m[a.ID] = true
	}
	return m
}

func diffSets(got, want map[string]bool) string {
	var missing, extra []string
	for id := range want {
		if !got[id] {
			missing = append(missing, id[:12])
		}
	}
	for id := range got {
		if !want[id] {
			extra = append(extra, id[:12])
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing)+len(extra) == 0 {
		return ""
	}
	return fmt.Sprintf("missing %d %v, extra %d %v", len(missing), missing, len(extra), extra)
}

// The gc command on a real containerd past 16 MiB: the dry run changes
// nothing and plans exactly the kubelet's policy; --apply, interrupted with
// SIGINT half way and run again, removes exactly that plan; the kubelet's
// list then fits; every running container, ready sandbox and each group's
// newest is still there, unchanged.
func TestGCOnContainerd(t *testing.T) {
	bin := exporterBinary(t)
	onEachContainerd(t, func(t *testing.T, rt *containerdRuntime) { gcOn(t, bin, rt) })
}

// gcOn is TestGCOnContainerd on a containerd of rt's version of its own.
func gcOn(t *testing.T, bin string, rt *containerdRuntime) {
	gctd, err := testenv.StartContainerdWith(filepath.Join(workRoot, "gc-containerd-"+rt.name), rt.opts)
	need(t, err)
	defer gctd.Stop()
	cc, err := gctd.Dial(256 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	rs := runtimeapi.NewRuntimeServiceClient(cc)
	pc := &testenv.PodClient{RS: rs, LogDir: filepath.Join(workRoot, "gc-pods")}
	c := ctx(t, 15*time.Minute)

	t0 := time.Now()
	node := populateGCNode(t, c, pc)
	before := listAll(t, c, rs)
	t.Logf("populated %d containers and sandboxes in %s", len(before), time.Since(t0).Round(time.Second))

	kcc, err := grpc.NewClient(gctd.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer kcc.Close()
	kubeletLike := runtimeapi.NewRuntimeServiceClient(kcc)
	if _, err := kubeletLike.ListContainers(c, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{}}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("kubelet-like ListContainers before gc: %v, want ResourceExhausted", err)
	}

	// The dry run: nothing changes, the plan is the kubelet's policy.
	endpoint := "--runtime.endpoint=" + gctd.Endpoint()
	dry, code, stderr := runGC(t, bin, endpoint)
	if code != 0 {
		t.Fatalf("dry run exit %d: %s", code, stderr)
	}
	if d := diffSets(ids(listAllIDs(listAll(t, c, rs))), ids(listAllIDs(before))); d != "" {
		t.Fatalf("the dry run changed the runtime: %s", d)
	}
	if d := diffSets(ids(dry.Plans["kubelet"].Actions), node.want); d != "" {
		t.Errorf("the kubelet's plan is not the kubelet's policy: %s", d)
	}
	want := map[string]bool{}
	for id := range node.want {
		want[id] = true
	}
	for id := range node.finished {
		want[id] = true
	}
	if d := diffSets(ids(dry.Plans["finished-pods"].Actions), want); d != "" {
		t.Errorf("the --finished-pods plan: %s", d)
	}
	if dry.Recommended != "kubelet" || dry.Before["ListContainers"] <= 16<<20 || dry.Plans["kubelet"].After["ListContainers"] >= 12<<20 {
		t.Errorf("recommended %q; ListContainers before %d, after %d", dry.Recommended, dry.Before["ListContainers"], dry.Plans["kubelet"].After["ListContainers"])
	}
	t.Logf("dry run: ListContainers %d bytes; the kubelet's policy removes %d items and leaves %d bytes, --finished-pods %d items and %d bytes; recommended %q",
		dry.Before["ListContainers"], len(dry.Plans["kubelet"].Actions), dry.Plans["kubelet"].After["ListContainers"],
		len(dry.Plans["finished-pods"].Actions), dry.Plans["finished-pods"].After["ListContainers"], dry.Command)

	// --apply, stopped by SIGINT after some removals.
	cmd := exec.Command(bin, "gc", "--output=json", "--apply", "--rate=20", endpoint)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		n, now := 0, listAllQuick(c, rs)
		for id := range before {
			if !now[id] {
				n++
			}
		}
		if n >= 40 || time.Now().After(deadline) {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGINT)
	cmd.Wait()
	var first gcReport
	if err := json.Unmarshal(out.Bytes(), &first); err != nil {
		t.Fatalf("interrupted run: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 || first.Applied == nil || !first.Applied.Interrupted ||
		len(first.Applied.Failures)+len(first.Applied.LeftAlone) != 0 {
		t.Fatalf("interrupted run: exit %d, %+v (the call in flight must end as it would have)\n%s", code, first.Applied, errOut.String())
	}
	mid := listAll(t, c, rs)
	gone := map[string]bool{}
	for id := range before {
		if _, ok := mid[id]; !ok {
			gone[id] = true
		}
	}
	for id := range gone {
		if !node.want[id] {
			t.Errorf("the interrupted run removed %s, which is not in the plan", id)
		}
	}
	t.Logf("interrupted after %d removals (%d attempted): exit 130; stderr: %s", len(gone), first.Applied.Removals, lastLine(errOut.String()))

	// Run again: it continues, and the end state is one run's.
	again, code, stderr := runGC(t, bin, "--apply", endpoint)
	if code != 0 || again.Applied == nil || len(again.Applied.Failures)+len(again.Applied.LeftAlone) != 0 {
		t.Fatalf("second run: exit %d, %+v\n%s", code, again.Applied, stderr)
	}
	after := listAll(t, c, rs)
	removed := map[string]bool{}
	for id := range before {
		if _, ok := after[id]; !ok {
			removed[id] = true
		}
	}
	if d := diffSets(removed, node.want); d != "" {
		t.Errorf("the two runs did not remove exactly the plan: %s", d)
	}
	if len(gone)+again.Applied.Removed["container"]+again.Applied.Removed["sandbox"]+again.Applied.Gone != len(node.want) {
		t.Errorf("first run %d + second run %+v != planned %d", len(gone), again.Applied, len(node.want))
	}
	for id := range node.keep {
		b, a := before[id], after[id]
		if a != b {
			t.Errorf("%s (%s %s) changed: before %+v, after %+v", id[:12], b.name, b.state, b, a)
		}
	}
	// Each (pod, container name) still has its newest.
	newest := map[[2]string]item{}
	for _, it := range before {
		k := [2]string{it.podUID, it.name}
		if !it.sandbox && it.created > newest[k].created {
			newest[k] = it
		}
	}
	for k, it := range newest {
		if _, ok := after[it.id]; !ok && !node.finished[it.id] {
			t.Errorf("the newest %s of pod %s is gone", k[1], k[0])
		}
	}
	resp, err := kubeletLike.ListContainers(c, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{}})
	if err != nil {
		t.Fatalf("kubelet-like ListContainers after gc: %v", err)
	}
	if again.Check == nil || !again.Check.Fits {
		t.Errorf("the command's own check after the run: %+v", again.Check)
	}
	t.Logf("after gc: the kubelet-like client lists %d containers; the second run removed %d containers and %d sandboxes in %.1fs (%d removal calls, each after a status call); check: %+v",
		len(resp.Containers), again.Applied.Removed["container"], again.Applied.Removed["sandbox"], again.Applied.Duration.Seconds(), again.Applied.Removals, again.Check)
}

func listAllIDs(m map[string]item) []gc.Action {
	var out []gc.Action
	for id := range m {
		out = append(out, gc.Action{ID: id})
	}
	return out
}

// listAllQuick lists ids only, ignoring errors (a poll).
func listAllQuick(c context.Context, rs runtimeapi.RuntimeServiceClient) map[string]bool {
	m := map[string]bool{}
	sbs, err := rs.ListPodSandbox(c, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return m
	}
	for _, s := range sbs.Items {
		m[s.Id] = true
		cs, err := rs.ListContainers(c, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: s.Id}})
		if err == nil {
			for _, ct := range cs.Containers {
				m[ct.Id] = true
			}
		}
	}
	return m
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
