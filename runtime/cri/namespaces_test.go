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

	"github.com/pleg-exporter/pleg_exporter/internal/fakecri"
	"github.com/pleg-exporter/pleg_exporter/runtime/cri"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// Namespaces as a runtime may send them, not UTF-8 or spelled like the
// placeholders, through the unfiltered lists and through the fallback: every
// namespace gets one label value of its own, never a placeholder's.
func TestNamespacesFromTheWireGetLabelsOfTheirOwn(t *testing.T) {
	for _, spec := range []fakecri.Spec{
		{Ready: 5, Exited: 100},
		{Ready: 5, Created: 3000, Exited: 3000, PaddingBytes: 3000}, // past the limit
	} {
		srv, err := fakecri.Start(filepath.Join(t.TempDir(), "cri.sock"), fakecri.Options{
			OnTheWire: map[string]string{"nsbadX": "nsbad\xff", "nsbadY": "nsbad\xfe"},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Stop()
		spec.Namespaces = []string{"nsbadX", "nsbadY", "(none)", "other", ""}
		sbs, cts := fakecri.Generate(spec)
		for _, c := range cts {
			if c.Labels["io.kubernetes.pod.namespace"] == "" {
				delete(c.Labels, "io.kubernetes.pod.namespace")
			}
		}
		srv.SetPopulation(sbs, cts)
		c, err := cri.New(cri.Config{Endpoint: srv.Endpoint(), MaxRecvBytes: 256 << 20, Timeout: 10 * time.Second, NamespacesTop: 10})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		snap := c.Relist(context.Background())
		if !snap.Counted || snap.Fallback != (spec.PaddingBytes > 0) {
			t.Fatalf("counted %v, fallback %v: %v", snap.Counted, snap.Fallback, snap.Err)
		}
		got := map[string]int{}
		for _, ns := range snap.Namespaces {
			for _, n := range ns.Containers {
				got[ns.Namespace] += n
			}
		}
		per := len(cts) / len(spec.Namespaces)
		want := map[string]int{`"nsbad\xff"`: per, `"nsbad\xfe"`: per, `"(none)"`: per, `"other"`: per, kubecontainer.NoNamespace: per}
		if len(snap.Namespaces) != len(want) {
			t.Errorf("fallback %v: namespaces %v, want %v", snap.Fallback, got, want)
		}
		for ns, n := range want {
			if got[ns] != n {
				t.Errorf("fallback %v: namespace %s has %d containers, want %d (all: %v)", snap.Fallback, ns, got[ns], n, got)
			}
		}
	}
}
