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
	"testing"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/internal/fakecri"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// What a kubelet with CRIListStreaming receives at once: the largest stream
// message, measured past the limit (the whole answer cannot be sent but
// every 1000-container message fits), the whole answer within it, nothing
// when the runtime does not stream.
func TestStreamMessageBytes(t *testing.T) {
	spec := fakecri.Spec{Ready: 20, Running: 20, Exited: 6000, PaddingBytes: 3000}
	sbs, cts := fakecri.Generate(spec)
	whole := proto.Size(&runtimeapi.ListContainersResponse{Containers: cts})
	largest := 0
	for i := 0; i < len(cts); i += 1000 {
		largest = max(largest, proto.Size(&runtimeapi.StreamContainersResponse{Containers: cts[i:min(i+1000, len(cts))]}))
	}
	if whole <= 16<<20 || largest >= 16<<20 {
		t.Fatalf("population: whole answer %d B, largest message %d B; want past and within 16 MiB", whole, largest)
	}
	sbWhole := proto.Size(&runtimeapi.ListPodSandboxResponse{Items: sbs})

	for _, streaming := range []bool{true, false} {
		_, c, _, _ := start(t, fakecri.Options{Streaming: streaming, StreamBatch: 1000}, spec)
		if _, err := c.Info(context.Background()); err != nil {
			t.Fatal(err)
		}
		snap := c.Relist(context.Background())
		if !snap.Counted || !snap.Fallback {
			t.Fatalf("streaming=%v: counted %v fallback %v: %v", streaming, snap.Counted, snap.Fallback, snap.Err)
		}
		ct, sb := snap.RPCs[kubecontainer.RPCListContainers], snap.RPCs[kubecontainer.RPCListPodSandbox]
		if ct.PayloadBytes != int64(whole) {
			t.Errorf("streaming=%v: payload %d, want the whole answer %d", streaming, ct.PayloadBytes, whole)
		}
		if snap.StreamAccepted != streaming {
			t.Errorf("streaming=%v: a streaming kubelet would accept the relist: %v", streaming, snap.StreamAccepted)
		}
		if !streaming {
			if ct.StreamKnown || sb.StreamKnown {
				t.Errorf("a runtime that does not stream has a stream message size: %+v %+v", ct, sb)
			}
			continue
		}
		if !ct.StreamKnown || ct.StreamMessageBytes != int64(largest) {
			t.Errorf("largest StreamContainers message = %d (known %v), want %d", ct.StreamMessageBytes, ct.StreamKnown, largest)
		}
		if !sb.StreamKnown || sb.StreamMessageBytes != int64(sbWhole) {
			t.Errorf("sandboxes within the limit: message bound %d (known %v), want the whole answer %d", sb.StreamMessageBytes, sb.StreamKnown, sbWhole)
		}
	}

	// A runtime whose send limit is above the kubelet's: the whole answer
	// arrives, and the stream is measured once to know what a streaming
	// kubelet would get.
	_, c, _, _ := start(t, fakecri.Options{Streaming: true, StreamBatch: 1000, MaxSendBytes: 64 << 20}, spec)
	if _, err := c.Info(context.Background()); err != nil {
		t.Fatal(err)
	}
	snap := c.Relist(context.Background())
	ct := snap.RPCs[kubecontainer.RPCListContainers]
	if snap.Fallback || ct.PayloadBytes != int64(whole) || ct.StreamMessageBytes != int64(largest) {
		t.Errorf("higher send limit: fallback %v, payload %d (want %d), largest message %d (want %d)",
			snap.Fallback, ct.PayloadBytes, whole, ct.StreamMessageBytes, largest)
	}
	// One message past the limit: the runtime says how large it was.
	_, c, _, _ = start(t, fakecri.Options{Streaming: true, StreamBatch: 5000}, spec)
	if _, err := c.Info(context.Background()); err != nil {
		t.Fatal(err)
	}
	snap = c.Relist(context.Background())
	first := proto.Size(&runtimeapi.StreamContainersResponse{Containers: cts[:5000]})
	if ct := snap.RPCs[kubecontainer.RPCListContainers]; !snap.Counted || ct.StreamMessageBytes != int64(first) {
		t.Errorf("a message past the limit: counted %v, largest message %d (known %v), want the refused one's %d",
			snap.Counted, ct.StreamMessageBytes, ct.StreamKnown, first)
	}
	if snap.StreamAccepted {
		t.Error("a message past the limit: a streaming kubelet would accept the relist")
	}
}

// Churn between relists, as the kubelet's PLEG sees it.
func TestRelistChanges(t *testing.T) {
	spec := fakecri.Spec{Ready: 10, NotReady: 2, Running: 10, Exited: 30}
	srv, c, sbs, cts := start(t, fakecri.Options{}, spec)
	if snap := c.Relist(context.Background()); !snap.Counted || snap.ChangesKnown {
		t.Fatalf("first relist: counted %v, changes known %v", snap.Counted, snap.ChangesKnown)
	}
	if snap := c.Relist(context.Background()); !snap.ChangesKnown || snap.ChangedItems != 0 || snap.ChangedPods != 0 {
		t.Fatalf("nothing changed: %d items in %d pods (known %v)", snap.ChangedItems, snap.ChangedPods, snap.ChangesKnown)
	}
	// Three running containers of three pods exit; two exited ones go.
	changed := map[string]bool{}
	var next []*runtimeapi.Container
	exited := 0
	for _, ct := range cts {
		ct = proto.Clone(ct).(*runtimeapi.Container)
		switch {
		case ct.State == runtimeapi.ContainerState_CONTAINER_RUNNING && len(changed) < 3 && !changed[ct.PodSandboxId]:
			ct.State = runtimeapi.ContainerState_CONTAINER_EXITED
			changed[ct.PodSandboxId] = true
		case ct.State == runtimeapi.ContainerState_CONTAINER_EXITED && exited < 2:
			exited++
			changed[ct.PodSandboxId] = true
			continue
		}
		next = append(next, ct)
	}
	srv.SetPopulation(sbs, next)
	snap := c.Relist(context.Background())
	if !snap.ChangesKnown || snap.ChangedItems != 5 || snap.ChangedPods != len(changed) {
		t.Errorf("changed %d items in %d pods, want 5 in %d", snap.ChangedItems, snap.ChangedPods, len(changed))
	}
}
