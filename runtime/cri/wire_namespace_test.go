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

	"google.golang.org/protobuf/encoding/protowire"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A runtime that is not written in Go may send label values that are not
// UTF-8, which Go protobuf would neither marshal nor decode. The scanner
// reads them as they are; making them label values is the model's job
// (kubecontainer.NamespaceLabel).
func TestScanReadsNamespacesAsSent(t *testing.T) {
	namespaces := []string{"bad\xff", "(none)", "other", ""}
	entry := func(k, v string) []byte {
		b := protowire.AppendTag(nil, mapKeyField, protowire.BytesType)
		b = protowire.AppendString(b, k)
		b = protowire.AppendTag(b, mapValueField, protowire.BytesType)
		return protowire.AppendString(b, v)
	}
	var cts, sbs []byte
	for i, ns := range namespaces {
		var c []byte
		c = protowire.AppendTag(c, containerIDField, protowire.BytesType)
		c = protowire.AppendString(c, "c"+string(rune('0'+i)))
		c = protowire.AppendTag(c, containerStateField, protowire.VarintType)
		c = protowire.AppendVarint(c, uint64(runtimeapi.ContainerState_CONTAINER_EXITED))
		c = protowire.AppendTag(c, containerLabelsField, protowire.BytesType)
		c = protowire.AppendBytes(c, entry(podNameLabel, "p"))
		if ns != "" {
			c = protowire.AppendTag(c, containerLabelsField, protowire.BytesType)
			c = protowire.AppendBytes(c, entry(namespaceLabel, ns))
		}
		cts = protowire.AppendTag(cts, listItemsField, protowire.BytesType)
		cts = protowire.AppendBytes(cts, c)

		var m []byte
		m = protowire.AppendTag(m, metadataNameField, protowire.BytesType)
		m = protowire.AppendString(m, "p")
		m = protowire.AppendTag(m, metadataNamespaceField, protowire.BytesType)
		m = protowire.AppendString(m, ns)
		var s []byte
		s = protowire.AppendTag(s, sandboxMetadataField, protowire.BytesType)
		s = protowire.AppendBytes(s, m)
		sbs = protowire.AppendTag(sbs, listItemsField, protowire.BytesType)
		sbs = protowire.AppendBytes(sbs, s)
	}
	for _, sandboxes := range []bool{false, true} {
		var got []string
		sum := listSummary{sandboxes: sandboxes, fields: FieldNamespace, onItem: func(it *Item) { got = append(got, string(it.Namespace)) }}
		b := cts
		if sandboxes {
			b = sbs
		}
		if err := scanList(b, &sum); err != nil {
			t.Fatalf("sandboxes %v: %v", sandboxes, err)
		}
		if len(got) != len(namespaces) {
			t.Fatalf("sandboxes %v: %q", sandboxes, got)
		}
		for i, ns := range namespaces {
			if got[i] != ns {
				t.Errorf("sandboxes %v: item %d namespace %q, sent %q", sandboxes, i, got[i], ns)
			}
		}
	}
}
