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
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/internal/fakecri"
	"github.com/pleg-exporter/pleg_exporter/runtime/cri"
)

func startProbing(t *testing.T, opts fakecri.Options) (*fakecri.Server, *cri.Client) {
	t.Helper()
	srv, err := fakecri.Start(filepath.Join(t.TempDir(), "cri.sock"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	c, err := cri.New(cri.Config{Endpoint: srv.Endpoint(), MaxRecvBytes: 256 << 20, Timeout: 10 * time.Second, ProbeMax: 100, ProbeTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return srv, c
}

// suspects are the ids a relist of this population should probe.
func suspects(sbs []*runtimeapi.PodSandbox, cts []*runtimeapi.Container) []string {
	var ids []string
	for _, s := range sbs {
		if s.State != runtimeapi.PodSandboxState_SANDBOX_READY {
			ids = append(ids, s.Id)
		}
	}
	for _, c := range cts {
		if c.State == runtimeapi.ContainerState_CONTAINER_UNKNOWN {
			ids = append(ids, c.Id)
		}
	}
	slices.Sort(ids)
	return ids
}

// probeAll probes every candidate (ProbeMax is above their number) and
// returns the ids probed; every call must have found its sandbox or
// container.
func probeAll(t *testing.T, c *cri.Client) []string {
	t.Helper()
	var ids []string
	for _, r := range c.Probe(context.Background()) {
		if r.Err != nil {
			t.Errorf("probe of %s %s: %v", r.Kind, r.ID, r.Err)
		}
		ids = append(ids, r.ID)
	}
	slices.Sort(ids)
	return ids
}

// Past the limit the kubelet's two lists fail, and that is when the hanging
// sandboxes pile up: the probe candidates come from the fallback lists, from
// the first relist over the limit on, and a sandbox that is gone is no
// longer probed once the fallback has listed every item again.
func TestProbeCandidatesFromTheFallback(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		srv, c := startProbing(t, fakecri.Options{Streaming: streaming, StreamBatch: 1000})
		if _, err := c.Info(context.Background()); err != nil {
			t.Fatal(err)
		}
		sbs, cts := fakecri.Generate(fakecri.Spec{Ready: 10, NotReady: 4, Created: 3000, Exited: 3000, Unknown: 3, PaddingBytes: 3000})
		srv.SetPopulation(sbs, cts)

		snap := c.Relist(context.Background())
		if !snap.Fallback || !snap.Counted {
			t.Fatalf("streaming %v: fallback %v, counted %v: %v", streaming, snap.Fallback, snap.Counted, snap.Err)
		}
		want := suspects(sbs, cts)
		if got := probeAll(t, c); !slices.Equal(got, want) {
			t.Fatalf("streaming %v: first relist over the limit: probed %d %q, want the %d suspects %q", streaming, len(got), got, len(want), want)
		}
		if sb, ct := srv.Calls("PodSandboxStatus"), srv.Calls("ContainerStatus"); sb != 4 || ct != 3 {
			t.Errorf("streaming %v: status calls: %d PodSandboxStatus, %d ContainerStatus; want 4 and 3", streaming, sb, ct)
		}

		// The newest notready sandbox is removed.
		sbs = sbs[:len(sbs)-1]
		srv.SetPopulation(sbs, cts)
		if snap := c.Relist(context.Background()); !snap.Fallback || !snap.Counted {
			t.Fatalf("streaming %v: second relist: fallback %v, counted %v: %v", streaming, snap.Fallback, snap.Counted, snap.Err)
		}
		want = suspects(sbs, cts)
		if got := probeAll(t, c); !slices.Equal(got, want) {
			t.Errorf("streaming %v: after a sandbox went: probed %q, want %q", streaming, got, want)
		}
	}
}

// cri-dockerd rejects the unknown state filter, so past the limit its
// unknown containers cannot be listed. Such a listing renews what it saw
// (notready sandboxes, a container it found in another state) and keeps the
// candidates it did not see.
func TestProbeCandidatesSurviveAnIncompleteListing(t *testing.T) {
	srv, c := startProbing(t, fakecri.Options{RejectUnknownFilter: true})
	sbs, cts := fakecri.Generate(fakecri.Spec{Ready: 2, NotReady: 2, Exited: 10, Unknown: 3})
	srv.SetPopulation(sbs, cts)
	if snap := c.Relist(context.Background()); snap.Fallback || snap.Err != nil {
		t.Fatalf("small population: fallback %v, %v", snap.Fallback, snap.Err)
	}
	if got, want := probeAll(t, c), suspects(sbs, cts); !slices.Equal(got, want) {
		t.Fatalf("probed %q, want %q", got, want)
	}

	// Past the limit now: padded exited containers (ids of their own), a
	// new notready sandbox, and one unknown container turned exited.
	_, pad := fakecri.Generate(fakecri.Spec{Ready: 1, Created: 3000, Exited: 3000, PaddingBytes: 3000})
	for _, p := range pad {
		p.Id = "pad" + p.Id[3:]
	}
	newSB := proto.Clone(sbs[3]).(*runtimeapi.PodSandbox)
	newSB.Id = "new" + newSB.Id[3:]
	bigSBs := append(slices.Clone(sbs), newSB)
	exited := proto.Clone(cts[len(cts)-1]).(*runtimeapi.Container)
	exited.State = runtimeapi.ContainerState_CONTAINER_EXITED
	bigCTs := append(append(slices.Clone(cts[:len(cts)-1]), exited), pad...)
	srv.SetPopulation(bigSBs, bigCTs)
	snap := c.Relist(context.Background())
	if !snap.Fallback || !snap.ContainersIncomplete {
		t.Fatalf("big population: fallback %v, incomplete %v: %v", snap.Fallback, snap.ContainersIncomplete, snap.Err)
	}
	// The two unknown containers it could not list stay; the one it saw
	// exited goes; the sandboxes are all new.
	want := suspects(bigSBs, bigCTs)
	if got := probeAll(t, c); !slices.Equal(got, want) {
		t.Errorf("after an incomplete listing: probed %q, want %q", got, want)
	}

	// An unknown container it cannot list is removed: the probe that
	// finds it gone is the last.
	gone := bigCTs[len(cts)-2]
	bigCTs = slices.DeleteFunc(bigCTs, func(c *runtimeapi.Container) bool { return c == gone })
	srv.SetPopulation(bigSBs, bigCTs)
	if snap := c.Relist(context.Background()); !snap.ContainersIncomplete {
		t.Fatalf("big population again: incomplete %v: %v", snap.ContainersIncomplete, snap.Err)
	}
	notFound := 0
	for _, r := range c.Probe(context.Background()) {
		if status.Code(r.Err) == codes.NotFound {
			notFound++
			if r.ID != gone.Id {
				t.Errorf("%s not found", r.ID)
			}
		}
	}
	if notFound != 1 {
		t.Errorf("%d probes found nothing, want 1 (%s)", notFound, gone.Id)
	}
	if got, want := probeAll(t, c), suspects(bigSBs, bigCTs); !slices.Equal(got, want) {
		t.Errorf("after a removed container was probed: probed %q, want %q", got, want)
	}

	// A complete listing again replaces them all.
	srv.SetPopulation(sbs[:3], cts[:len(cts)-2])
	if snap := c.Relist(context.Background()); snap.Fallback || snap.Err != nil {
		t.Fatalf("small again: fallback %v, %v", snap.Fallback, snap.Err)
	}
	if got, want := probeAll(t, c), suspects(sbs[:3], cts[:len(cts)-2]); !slices.Equal(got, want) {
		t.Errorf("after a complete listing: probed %q, want %q", got, want)
	}
}
