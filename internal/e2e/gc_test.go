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

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/gc"
	"github.com/pleg-exporter/pleg_exporter/internal/stack"
	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
)

func runGC(t *testing.T, bin string, args ...string) (*gc.Report, int) {
	t.Helper()
	r, code, err := tryGC(bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return r, code
}

// tryGC runs the gc command; safe outside the test's goroutine.
func tryGC(bin string, args ...string) (*gc.Report, int, error) {
	cmd := exec.Command(bin, append([]string{"gc", "--output=json"}, args...)...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	cmd.Run()
	r := &gc.Report{}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return r, 0, fmt.Errorf("gc %v: exit %d: %v\n%s\n%s", args, cmd.ProcessState.ExitCode(), err, out.String(), stderr.String())
	}
	return r, cmd.ProcessState.ExitCode(), nil
}

// staticPodNames are the static pods the kubelet runs throughout the test
// (startStaticPods), as the kubelet names them. (The exporter's pod of an
// earlier step is gone: the kubelet's own GC removes its sandbox once it
// works again, whatever gc does.)
var staticPodNames = map[string]bool{"web-" + testenv.KubeletNode: true, "queue-" + testenv.KubeletNode: true}

// staticItem is a container or sandbox of one of the kubelet's static pods:
// what it is, and whether the kubelet's own GC would have
// to keep it (a running container, a ready sandbox, the newest container of
// its pod and name).
type staticItem struct {
	desc string
	keep bool
}

func staticPods(t *testing.T, ctx context.Context, rs runtimeapi.RuntimeServiceClient) map[string]staticItem {
	t.Helper()
	m := map[string]staticItem{}
	sbs, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	newest := map[string]*runtimeapi.Container{} // pod/container name -> newest
	for _, s := range sbs.Items {
		if !staticPodNames[s.Metadata.Name] {
			continue
		}
		m[s.Id] = staticItem{desc: fmt.Sprintf("sandbox %s %v attempt %d", s.Metadata.Name, s.State, s.Metadata.Attempt),
			keep: s.State == runtimeapi.PodSandboxState_SANDBOX_READY}
		cs, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: s.Id}})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs.Containers {
			m[c.Id] = staticItem{desc: fmt.Sprintf("%s/%s %v attempt %d restartCount %s", s.Metadata.Name, c.Metadata.Name, c.State, c.Metadata.Attempt,
				c.Annotations["io.kubernetes.container.restartCount"]), keep: c.State == runtimeapi.ContainerState_CONTAINER_RUNNING}
			k := s.Metadata.Name + "/" + c.Metadata.Name
			if n := newest[k]; n == nil || c.CreatedAt > n.CreatedAt {
				newest[k] = c
			}
		}
	}
	for _, c := range newest {
		it := m[c.Id]
		it.keep = true
		m[c.Id] = it
	}
	return m
}

// healWithGC brings the overflowing node back with the product: the gc
// dry run recommends a policy, the command it prints is run, and within 60 s
// of its end the kubelet relists again and reports PLEG healthy, its static
// pods as they were (the same containers, attempts and restart counts).
func healWithGC(t *testing.T, ctx context.Context, st *stack.Stack, rs runtimeapi.RuntimeServiceClient, bin string, frozenSeen float64) {
	static := staticPods(t, ctx, rs)
	if len(static) < 6 { // web: sandbox, app; queue: sandbox, migrate (exited), worker, metrics
		t.Fatalf("the static pods have %d containers and sandboxes before gc, want at least 6", len(static))
	}
	endpoint := "--runtime.endpoint=" + st.Containerd.Endpoint()
	dry, code := runGC(t, bin, endpoint)
	if code != 0 || dry.Recommended == "" || !strings.Contains(dry.Command, "--apply") {
		t.Fatalf("gc dry run: exit %d, recommended %q, command %q", code, dry.Recommended, dry.Command)
	}
	t.Logf("gc dry run: ListContainers %d bytes; the kubelet's policy removes %d items (→ %d bytes), --finished-pods %d (→ %d bytes); recommends %q: %s",
		dry.Before["ListContainers"], len(dry.Plans["kubelet"].Actions), dry.Plans["kubelet"].After["ListContainers"],
		len(dry.Plans["finished-pods"].Actions), dry.Plans["finished-pods"].After["ListContainers"], dry.Command, dry.Why)

	// The command as recommended, run by the binary under test.
	args := strings.Fields(dry.Command)
	if len(args) < 2 || args[1] != "gc" {
		t.Fatalf("recommended command %q", dry.Command)
	}
	// gc runs while the kubelet's metrics are polled: when does it relist
	// again?
	type result struct {
		r    *gc.Report
		code int
		err  error
	}
	done := make(chan result, 1)
	began := time.Now()
	go func() {
		r, code, err := tryGC(bin, args[2:]...)
		done <- result{r, code, err}
	}()
	var relisted, ended time.Time
	var res result
	for relisted.IsZero() || ended.IsZero() {
		select {
		case res = <-done:
			ended = time.Now()
		case <-time.After(250 * time.Millisecond):
		}
		if relisted.IsZero() {
			if k, err := st.Kubelet.Metrics(); err == nil {
				if s, _ := testenv.Gauge(k, "kubelet_pleg_last_seen_seconds", nil); s > frozenSeen {
					relisted = time.Now()
				}
			}
		}
		if !ended.IsZero() && relisted.IsZero() && time.Since(ended) > 60*time.Second {
			t.Fatalf("the kubelet did not relist within 60 s of gc's end:\n%s", st.Kubelet.LogTail(20))
		}
		if ended.IsZero() && time.Since(began) > 10*time.Minute {
			t.Fatal("gc did not end within 10 minutes")
		}
	}
	r, code := res.r, res.code
	if res.err != nil {
		t.Fatal(res.err)
	}
	if code != 0 || r.Applied == nil || len(r.Applied.Failures) != 0 || r.Check == nil || !r.Check.Fits {
		t.Fatalf("%s: exit %d, %+v, check %+v", dry.Command, code, r.Applied, r.Check)
	}
	t.Logf("gc: %s removed %d containers and %d sandboxes (%d already gone) in %s, %d removals (each after a status call); the kubelet's lists then answer %v bytes",
		dry.Recommended, r.Applied.Removed["container"], r.Applied.Removed["sandbox"], r.Applied.Gone, ended.Sub(began).Round(100*time.Millisecond),
		r.Applied.Removals, r.Check.Payload)

	// Healthy: the sync loop stops skipping for PLEG.
	time.Sleep(10 * time.Second)
	if l, bad := st.Kubelet.FindLog(relisted.Add(3*time.Second), logNotHealthy); bad {
		t.Errorf("the kubelet still reports %q after it relisted: %s", logNotHealthy, clip(l.Text, 200))
	}
	when := fmt.Sprintf("%s before it ended", ended.Sub(relisted).Round(100*time.Millisecond))
	if relisted.After(ended) {
		when = fmt.Sprintf("%s after it ended", relisted.Sub(ended).Round(100*time.Millisecond))
	}
	t.Logf("gc: the kubelet relisted again %s after the gc command began, %s; no %q since",
		relisted.Sub(began).Round(100*time.Millisecond), when, logNotHealthy)

	// What the kubelet's GC must keep is there, unchanged; anything else of
	// the static pods that went was in the plan (an old, empty sandbox of
	// a restarted pod, an older attempt), as the kubelet's GC would have.
	after := staticPods(t, ctx, rs)
	planned := map[string]bool{}
	for _, a := range dry.Plans[dry.Recommended].Actions {
		planned[a.ID] = true
	}
	kept, went := 0, []string{}
	for id, was := range static {
		now, there := after[id]
		switch {
		case was.keep && now.desc != was.desc:
			t.Errorf("static pod item %s: %q before gc, %q after", id[:12], was.desc, now.desc)
		case was.keep:
			kept++
		case !there && !planned[id]:
			t.Errorf("static pod item %s (%s) went without being in the plan", id[:12], was.desc)
		case !there:
			went = append(went, was.desc)
		}
	}
	for id, now := range after {
		if _, ok := static[id]; !ok {
			t.Errorf("static pod item %s (%s) appeared during gc: a pod restarted", id[:12], now.desc)
		}
	}
	t.Logf("gc: the static pods' %d running containers, ready sandboxes and newest containers are as they were; planned and removed as the kubelet's GC would: %v",
		kept, went)
}
