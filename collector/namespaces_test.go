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

package collector

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pleg-exporter/pleg_exporter/internal/fakecri"
	"github.com/pleg-exporter/pleg_exporter/runtime/cri"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer/kubecontainertest"
)

// namespaceSeriesOf gathers the namespace families and fails on a scrape
// error or a series seen twice.
func namespaceSeriesOf(t *testing.T, reg prometheus.Gatherer) (containers map[string]float64, bytes map[string]float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("scrape failed: %v", err)
	}
	containers, bytes = map[string]float64{}, map[string]float64{}
	seen := map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName() + m.String()
			if seen[key] {
				t.Errorf("series %s twice", key)
			}
			seen[key] = true
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
				if !utf8.ValidString(l.GetValue()) {
					t.Errorf("%s: label %s=%q is not UTF-8", mf.GetName(), l.GetName(), l.GetValue())
				}
			}
			switch mf.GetName() {
			case "pleg_namespace_containers":
				containers[labels["namespace"]] += m.GetGauge().GetValue()
			case "pleg_namespace_payload_bytes":
				bytes[labels["namespace"]] += m.GetGauge().GetValue()
			}
		}
	}
	return containers, bytes
}

// Namespaces come from the runtime's bytes, read off the wire unchecked: a
// value that is not UTF-8, one spelled like the "no namespace" placeholder
// and one spelled like the "other" bucket must each get a series of its own,
// and the scrape must not fail.
func TestNamespacesFromTheWireStayScrapable(t *testing.T) {
	// Go protobuf refuses to marshal what is not UTF-8: the fake swaps
	// these placeholders for the raw bytes after marshalling.
	srv, err := fakecri.Start(filepath.Join(t.TempDir(), "cri.sock"), fakecri.Options{
		OnTheWire: map[string]string{"nsbadX": "nsbad\xff", "nsbadY": "nsbad\xfe"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	const noLabel = "\x00no label"
	byNS := []struct {
		ns string
		n  int
	}{
		{"other", 7}, {"(none)", 6}, {"nsbadX", 5}, {"nsbadY", 4}, {noLabel, 3}, {"default", 2}, {"tail", 1},
	}
	total := 0
	for _, b := range byNS {
		total += b.n
	}
	sbs, cts := fakecri.Generate(fakecri.Spec{Ready: 3, Exited: total, Namespaces: []string{"nsbadX", "(none)", "other"}})
	i := 0
	for _, b := range byNS {
		for range b.n {
			if b.ns == noLabel {
				delete(cts[i].Labels, "io.kubernetes.pod.namespace")
			} else {
				cts[i].Labels["io.kubernetes.pod.namespace"] = b.ns
			}
			i++
		}
	}
	srv.SetPopulation(sbs, cts)
	c, err := cri.New(cri.Config{Endpoint: srv.Endpoint(), MaxRecvBytes: 64 << 20, Timeout: 10 * time.Second, NamespacesTop: 5})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	now := t0
	r, reg := newTestRelister(c, &now, false)
	r.RelistOnce(context.Background())

	containers, bytes := namespaceSeriesOf(t, reg)
	want := map[string]float64{
		`"other"`:     7, // the namespace called other
		`"(none)"`:    6, // the namespace called (none)
		`"nsbad\xff"`: 5,
		`"nsbad\xfe"`: 4,
		"(none)":      3, // no namespace label
		"other":       3, // default and tail, past the top 5
	}
	for ns, n := range want {
		if containers[ns] != n {
			t.Errorf("pleg_namespace_containers{namespace=%q} = %v, want %v", ns, containers[ns], n)
		}
		if _, ok := bytes[ns]; !ok {
			t.Errorf("pleg_namespace_payload_bytes{namespace=%q} missing", ns)
		}
	}
	if len(containers) != len(want) || len(bytes) != len(want) {
		t.Errorf("namespaces: containers %v, bytes %v; want %d namespaces", containers, bytes, len(want))
	}
	sum := 0.0
	for _, v := range bytes {
		sum += v
	}
	if payload := gatherValue(t, reg, "pleg_relist_payload_bytes", "ListContainers"); sum != payload {
		t.Errorf("namespace bytes sum to %v, the ListContainers answer is %v", sum, payload)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// Whatever a runtime puts in a snapshot, the namespace series stay valid
// and unique: values that are not UTF-8 are made so, and series that end up
// with one label value are summed.
func TestNamespaceSeriesAreValidAndUnique(t *testing.T) {
	now := t0
	s := healthySnap(t0)
	s.Namespaces = []kubecontainer.NamespaceStat{
		{Namespace: "a", Containers: map[string]int{ContainerExited: 2}, PayloadBytes: 20},
		{Namespace: "bad\xff", Containers: map[string]int{ContainerExited: 3}, PayloadBytes: 30},
		{Namespace: "bad\xfe", Containers: map[string]int{ContainerRunning: 1}, PayloadBytes: 10},
		{Namespace: "a", Containers: map[string]int{ContainerExited: 1}, PayloadBytes: 5},
	}
	r, reg := newTestRelister(&kubecontainertest.Runtime{Snaps: []*Snapshot{s}}, &now, false)
	r.RelistOnce(context.Background())
	containers, bytes := namespaceSeriesOf(t, reg)
	bad := strings.ToValidUTF8("bad\xff", "\uFFFD")
	if containers["a"] != 3 || bytes["a"] != 25 || containers[bad] != 4 || bytes[bad] != 40 || len(containers) != 2 {
		t.Errorf("containers %v, bytes %v", containers, bytes)
	}
}

func gatherValue(t *testing.T, reg prometheus.Gatherer, name, rpc string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "rpc" && l.GetValue() == rpc {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("%s{rpc=%q} not exported", name, rpc)
	return 0
}
