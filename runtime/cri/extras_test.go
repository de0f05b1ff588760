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

package cri_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/internal/fakecri"
	"github.com/pleg-exporter/pleg_exporter/runtime/cri"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

func nsTruth(cts []*runtimeapi.Container) map[string]int {
	m := map[string]int{}
	for _, c := range cts {
		m[c.Labels["io.kubernetes.pod.namespace"]]++
	}
	return m
}

func checkNamespaces(t *testing.T, snap *kubecontainer.Snapshot, cts []*runtimeapi.Container, top int) {
	t.Helper()
	want := nsTruth(cts)
	if len(snap.Namespaces) != top+1 || snap.Namespaces[top].Namespace != kubecontainer.OtherNamespace {
		t.Fatalf("namespaces %+v: want top %d + other", snap.Namespaces, top)
	}
	total, bytes := 0, int64(0)
	for i, ns := range snap.Namespaces {
		n := 0
		for _, v := range ns.Containers {
			n += v
		}
		total += n
		bytes += ns.PayloadBytes
		if i < top && n != want[ns.Namespace] {
			t.Errorf("namespace %s: %d containers, runtime says %d", ns.Namespace, n, want[ns.Namespace])
		}
		if i > 0 && i < top && n > func() int {
			m := 0
			for _, v := range snap.Namespaces[i-1].Containers {
				m += v
			}
			return m
		}() {
			t.Errorf("namespaces not ordered by count")
		}
	}
	if total != len(cts) {
		t.Errorf("namespaces sum to %d containers, want %d", total, len(cts))
	}
	if full := int64(proto.Size(&runtimeapi.ListContainersResponse{Containers: cts})); bytes != full {
		t.Errorf("namespace bytes sum to %d, the answer is %d", bytes, full)
	}
}

func TestNamespacesTopN(t *testing.T) {
	srv, err := fakecri.Start(filepath.Join(t.TempDir(), "cri.sock"), fakecri.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	// Sandboxes cycle through 4 namespaces, containers through sandboxes:
	// the namespaces get 40, 30, 20 and 10 containers via uneven pods.
	sbs, cts := fakecri.Generate(fakecri.Spec{Namespaces: []string{"batch-jobs", "default", "ci", "monitoring"}, Ready: 8, Exited: 70, Running: 3})
	cts = append(cts[:0:0], cts...)
	srv.SetPopulation(sbs, cts)
	c, _ := cri.New(cri.Config{Endpoint: srv.Endpoint(), MaxRecvBytes: 64 << 20, Timeout: 5 * time.Second, NamespacesTop: 2})
	defer c.Close()
	checkNamespaces(t, c.Relist(context.Background()), cts, 2)
}

func TestNamespacesThroughFallback(t *testing.T) {
	srv, err := fakecri.Start(filepath.Join(t.TempDir(), "cri.sock"), fakecri.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	sbs, cts := fakecri.Generate(fakecri.Spec{Namespaces: []string{"leaky", "default", "ci"}, Ready: 30, Exited: 7000, PaddingBytes: 3000})
	srv.SetPopulation(sbs, cts)
	c, _ := cri.New(cri.Config{Endpoint: srv.Endpoint(), MaxRecvBytes: 256 << 20, Timeout: 10 * time.Second, NamespacesTop: 1})
	defer c.Close()
	snap := c.Relist(context.Background())
	if !snap.Fallback || !snap.Counted {
		t.Fatalf("fallback %v counted %v", snap.Fallback, snap.Counted)
	}
	checkNamespaces(t, snap, cts, 1)
}

// A status call that hangs is a timeout after --probe.timeout; the relist
// itself is not slowed down.
func TestProbesTimeOutWithoutSlowingRelists(t *testing.T) {
	srv, err := fakecri.Start(filepath.Join(t.TempDir(), "cri.sock"), fakecri.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	sbs, cts := fakecri.Generate(fakecri.Spec{Ready: 2, NotReady: 5, Running: 2, Unknown: 2})
	srv.SetPopulation(sbs, cts)
	srv.HangStatus(sbs[2].Id) // the oldest notready sandbox
	c, _ := cri.New(cri.Config{Endpoint: srv.Endpoint(), MaxRecvBytes: 64 << 20, Timeout: 5 * time.Second, ProbeMax: 3, ProbeTimeout: 300 * time.Millisecond})
	defer c.Close()
	t0 := time.Now()
	if snap := c.Relist(context.Background()); snap.Err != nil {
		t.Fatal(snap.Err)
	}
	relist := time.Since(t0)
	res := c.Probe(context.Background())
	if len(res) != 3 || res[0].ID != sbs[2].Id || !res[0].TimedOut || res[1].TimedOut || res[2].TimedOut {
		t.Fatalf("first round: %+v", res)
	}
	if res[0].Duration < 300*time.Millisecond || res[0].Duration > 3*time.Second {
		t.Errorf("timed-out probe took %s", res[0].Duration)
	}
	if relist > 200*time.Millisecond {
		t.Errorf("relist took %s", relist)
	}
	// Rotation: the next round starts after the last one probed.
	seen := map[string]bool{}
	for _, r := range res {
		seen[r.ID] = true
	}
	res2 := c.Probe(context.Background())
	for _, r := range res2[:min(len(res2), 4)] {
		if seen[r.ID] && len(seen) < 7 {
			t.Errorf("second round probed %s again before the others", r.ID)
		}
		seen[r.ID] = true
	}
	if len(seen) != 6 {
		t.Errorf("two rounds of 3 covered %d of 7 candidates (5 notready + 2 unknown), want 6", len(seen))
	}
	if srv.Calls("PodSandboxStatus")+srv.Calls("ContainerStatus") != 6 {
		t.Errorf("status calls %d", srv.Calls("PodSandboxStatus")+srv.Calls("ContainerStatus"))
	}
}
