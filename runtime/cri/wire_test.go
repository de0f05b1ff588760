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

package cri

import (
	"testing"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/internal/fakecri"
)

// The scanner reads from the wire what a decoder reads: every field it is
// asked for, of every item, and the exact size each item adds.
func TestScanListMatchesDecode(t *testing.T) {
	sbs, cts := fakecri.Generate(fakecri.Spec{Ready: 3, NotReady: 2, Created: 4, Running: 5, Exited: 6, Unknown: 7, Namespaces: []string{"a", "bb"}})
	all := FieldID | FieldCreated | FieldNamespace | FieldIdentity
	b, _ := proto.Marshal(&runtimeapi.ListContainersResponse{Containers: cts})
	var got []*runtimeapi.Container
	var bytes int64
	sum := listSummary{fields: all, onItem: func(it *Item) {
		bytes += int64(it.Bytes)
		got = append(got, &runtimeapi.Container{
			Id: string(it.ID), PodSandboxId: string(it.SandboxID), State: runtimeapi.ContainerState(it.State), CreatedAt: it.CreatedAt,
			Metadata: &runtimeapi.ContainerMetadata{Name: string(it.Name), Attempt: it.Attempt},
			Labels:   map[string]string{namespaceLabel: string(it.Namespace), podNameLabel: string(it.Pod), podUIDLabel: string(it.PodUID)},
		})
	}}
	if err := scanList(b, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Size != len(b) || sum.Items != len(cts) || bytes != int64(len(b)) {
		t.Errorf("containers: size %d/%d, items %d/%d, item bytes %d", sum.Size, len(b), sum.Items, len(cts), bytes)
	}
	for i, c := range cts {
		want := &runtimeapi.Container{
			Id: c.Id, PodSandboxId: c.PodSandboxId, State: c.State, CreatedAt: c.CreatedAt,
			Metadata: &runtimeapi.ContainerMetadata{Name: c.Metadata.Name, Attempt: c.Metadata.Attempt},
			Labels:   map[string]string{namespaceLabel: c.Labels[namespaceLabel], podNameLabel: c.Labels[podNameLabel], podUIDLabel: c.Labels[podUIDLabel]},
		}
		if !proto.Equal(got[i], want) {
			t.Errorf("container %d: scanned %v, decoded %v", i, got[i], want)
		}
	}

	b, _ = proto.Marshal(&runtimeapi.ListPodSandboxResponse{Items: sbs})
	var gotSB []*runtimeapi.PodSandbox
	sb := listSummary{sandboxes: true, fields: all, onItem: func(it *Item) {
		gotSB = append(gotSB, &runtimeapi.PodSandbox{
			Id: string(it.ID), State: runtimeapi.PodSandboxState(it.State), CreatedAt: it.CreatedAt,
			Metadata: &runtimeapi.PodSandboxMetadata{Name: string(it.Pod), Uid: string(it.PodUID), Namespace: string(it.Namespace), Attempt: it.Attempt},
		})
	}}
	if err := scanList(b, &sb); err != nil {
		t.Fatal(err)
	}
	for i, s := range sbs {
		want := &runtimeapi.PodSandbox{Id: s.Id, State: s.State, CreatedAt: s.CreatedAt, Metadata: s.Metadata}
		if !proto.Equal(gotSB[i], want) {
			t.Errorf("sandbox %d: scanned %v, decoded %v", i, gotSB[i], want)
		}
	}

	// Asked for nothing, it reads state and size only.
	bare := listSummary{onItem: func(it *Item) {
		if it.ID != nil || it.Namespace != nil || it.Name != nil || it.CreatedAt != 0 {
			t.Fatalf("read fields it was not asked for: %+v", it)
		}
	}}
	b, _ = proto.Marshal(&runtimeapi.ListContainersResponse{Containers: cts})
	if err := scanList(b, &bare); err != nil || bare.Items != len(cts) {
		t.Fatalf("bare scan: %d items, %v", bare.Items, err)
	}
}

func FuzzScanList(f *testing.F) {
	_, cts := fakecri.Generate(fakecri.Spec{Ready: 1, Running: 2, Exited: 1})
	b, _ := proto.Marshal(&runtimeapi.ListContainersResponse{Containers: cts})
	f.Add(b)
	f.Add([]byte{0x0a, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		var sum listSummary
		err := scanList(data, &sum)
		var resp runtimeapi.ListContainersResponse
		if perr := proto.Unmarshal(data, &resp); perr == nil && err == nil && sum.Items != len(resp.Containers) {
			t.Errorf("scanner counted %d, decoder %d", sum.Items, len(resp.Containers))
		}
	})
}
