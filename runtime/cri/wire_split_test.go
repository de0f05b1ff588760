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
	"fmt"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/internal/fakecri"
)

// split cuts b into buffers of n bytes, as gRPC hands a message over in
// frames: items, tags and varints then straddle buffers.
func split(b []byte, n int) mem.BufferSlice {
	var s mem.BufferSlice
	for len(b) > n {
		s = append(s, mem.SliceBuffer(b[:n]))
		b = b[n:]
	}
	return append(s, mem.SliceBuffer(b))
}

// scanned is everything the scanner reports of an answer.
func scanned(data mem.BufferSlice, sandboxes bool) (string, error) {
	var out []byte
	s := listSummary{sandboxes: sandboxes, fields: FieldID | FieldCreated | FieldNamespace | FieldIdentity,
		onItem: func(it *Item) {
			out = fmt.Appendf(out, "%d %d %q %d %q %q %q %q %q %d|", it.State, it.Bytes, it.ID, it.CreatedAt,
				it.Namespace, it.Name, it.Pod, it.PodUID, it.SandboxID, it.Attempt)
		}}
	err := scanBuffers(data, &s)
	return fmt.Sprintf("%d %d %s", s.Size, s.Items, out), err
}

// Wherever the frames cut the answer, the scanner reads the same.
func TestScanAcrossBuffers(t *testing.T) {
	sbs, cts := fakecri.Generate(fakecri.Spec{Ready: 3, NotReady: 2, Created: 4, Running: 5, Exited: 6, Unknown: 7, PaddingBytes: 300})
	ct, _ := proto.Marshal(&runtimeapi.ListContainersResponse{Containers: cts})
	sb, _ := proto.Marshal(&runtimeapi.ListPodSandboxResponse{Items: sbs})
	for _, c := range []struct {
		b         []byte
		sandboxes bool
	}{{ct, false}, {sb, true}} {
		whole, err := scanned(split(c.b, len(c.b)), c.sandboxes)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{1, 2, 3, 7, 64, 999, 1 << 14} {
			got, err := scanned(split(c.b, n), c.sandboxes)
			if err != nil || got != whole {
				t.Fatalf("sandboxes %v, buffers of %d bytes: %v\n got %s\nwant %s", c.sandboxes, n, err, got, whole)
			}
		}
	}
}

func FuzzScanSplit(f *testing.F) {
	_, cts := fakecri.Generate(fakecri.Spec{Ready: 1, Running: 2, Exited: 1})
	b, _ := proto.Marshal(&runtimeapi.ListContainersResponse{Containers: cts})
	f.Add(b, uint8(5))
	f.Add([]byte{0x0a, 0xff, 0xff}, uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, n uint8) {
		whole, werr := scanned(split(data, len(data)+1), false)
		got, err := scanned(split(data, int(n)+1), false)
		if (werr == nil) != (err == nil) || (err == nil && got != whole) {
			t.Errorf("buffers of %d: %v %s; whole: %v %s", int(n)+1, err, got, werr, whole)
		}
	})
}
