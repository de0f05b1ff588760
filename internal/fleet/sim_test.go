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

package fleet

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

var (
	recOnce sync.Once
	recRec  *Recording
	recErr  error
)

// recording records once per test binary (a few seconds: the creeping and
// overflowing populations are thousands of containers).
func recording(t *testing.T) *Recording {
	t.Helper()
	recOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fleet")
		if err != nil {
			recErr = err
			return
		}
		defer os.RemoveAll(dir)
		recRec, recErr = Record(context.Background(), DefaultRecordConfig(dir))
	})
	if recErr != nil {
		t.Fatal(recErr)
	}
	return recRec
}

func TestRecord(t *testing.T) {
	rec := recording(t)
	for _, p := range rec.Healthy {
		if p.Steady.Err != nil || !p.Steady.Counted || p.Steady.Fallback {
			t.Errorf("%s: err %v counted %v fallback %v", p.Name, p.Steady.Err, p.Steady.Counted, p.Steady.Fallback)
		}
		if !p.Steady.ChangesKnown || p.Steady.ChangedItems != 0 || p.First.ChangesKnown || len(p.First.PodUIDs) == 0 {
			t.Errorf("%s: the first relist must see every pod new, the second none changed", p.Name)
		}
	}
	prev := 0.0
	for _, p := range rec.Creeping {
		r := rec.Ratio(p)
		if r <= prev || r >= 1 || p.Steady.Err != nil {
			t.Errorf("%s: ratio %.3f after %.3f, err %v", p.Name, r, prev, p.Steady.Err)
		}
		prev = r
	}
	if got, want := rec.Ratio(rec.Creeping[0]), 0.5; got < want-0.02 || got > want+0.02 {
		t.Errorf("first creeping ratio %.3f, want about %.2f", got, want)
	}
	o := rec.Overflow.Steady
	if kubecontainer.ErrorCode(o.Err) != kubecontainer.CodeResourceExhausted || !o.Counted || !o.Fallback {
		t.Errorf("overflow: err %v counted %v fallback %v", o.Err, o.Counted, o.Fallback)
	}
	if total := sumStates(o.Containers); total != rec.Overflow.Containers {
		t.Errorf("overflow: the fallback counted %d containers, the runtime has %d", total, rec.Overflow.Containers)
	}
	if len(rec.Probes) == 0 || len(rec.Inspection.Calls) == 0 {
		t.Errorf("no probes (%d) or inspection calls (%d) recorded", len(rec.Probes), len(rec.Inspection.Calls))
	}
}

func sumStates(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func TestDeal(t *testing.T) {
	s, err := New(Config{Nodes: 1000, Seed: 7}, recording(t))
	if err != nil {
		t.Fatal(err)
	}
	got := s.ByLife()
	for l, share := range DefaultShares {
		if want := int(share*1000 + 0.5); got[l] != want {
			t.Errorf("%s: %d nodes, want %d", l, got[l], want)
		}
	}
	faulty := 0
	for l, k := range got {
		if l != Healthy {
			faulty += k
		}
	}
	if got[Healthy] != 1000-faulty || faulty == 0 {
		t.Errorf("%d healthy and %d other nodes of 1000", got[Healthy], faulty)
	}
	again, _ := New(Config{Nodes: 1000, Seed: 7}, recording(t))
	for i, n := range s.Nodes() {
		if again.Nodes()[i].Life != n.Life {
			t.Fatalf("node %d: %s, then %s with the same seed", i, n.Life, again.Nodes()[i].Life)
		}
	}
	if _, err := New(Config{Nodes: 3, Seed: 7}, recording(t)); err == nil {
		t.Error("3 nodes for 6 faulty lives: no error")
	}
	if _, err := New(Config{Nodes: 10, Shares: map[Life]float64{Frozen: 1.5}}, recording(t)); err == nil {
		t.Error("a share over 1: no error")
	}
}

// scrape gets a target and parses its text exposition.
func scrape(t *testing.T, url string) (map[string]*dto.MetricFamily, int) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		return nil, resp.StatusCode
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	return mfs, resp.StatusCode
}

func value(t *testing.T, mfs map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	mf, ok := mfs[name]
	if !ok {
		t.Fatalf("no %s", name)
	}
	for _, m := range mf.GetMetric() {
		if matches(m, labels) {
			switch {
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s%v", name, labels)
	return 0
}

func matches(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// goldenFamilies are the families of the real exporter's exposition on a
// healthy containerd node (testdata, written by the collector's tests).
func goldenFamilies(t *testing.T) []string {
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "metrics-healthy.prom"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[1] == "TYPE" {
			out = append(out, f[2])
		}
	}
	return out
}

func TestSimTargets(t *testing.T) {
	rec := recording(t)
	shares := map[Life]float64{Creeping: 0.1, Overflowing: 0.1, Frozen: 0.1, KubeletRestarting: 0.1, Gone: 0.1, OldExporter: 0.1}
	s, err := New(Config{Nodes: 20, Shares: shares, Seed: 1, RelistInterval: 200 * time.Millisecond,
		RelistTimeout: time.Hour, FaultAfter: 500 * time.Millisecond, KubeletRestartEvery: time.Hour}, rec)
	if err != nil {
		t.Fatal(err)
	}
	addr := serveFleet(t, s)
	time.Sleep(2 * time.Second)

	groups := s.Targets("sim", addr)
	if len(groups) != 40 {
		t.Fatalf("%d target groups for 20 nodes", len(groups))
	}
	seen := map[string]bool{}
	for _, g := range groups {
		key := g.Labels["job"] + "/" + g.Labels["instance"]
		if seen[key] {
			t.Errorf("two targets %s", key)
		}
		seen[key] = true
	}
	url := func(n *Node, path string) string { return "http://" + addr + fmt.Sprintf(path, n.Cluster, n.Name) }
	for _, n := range s.Nodes() {
		mfs, code := scrape(t, url(n, exporterPath))
		if n.Life == Gone {
			if code != http.StatusServiceUnavailable {
				t.Errorf("%s (%s): exporter answered %d", n.Name, n.Life, code)
			}
			continue
		}
		if code != http.StatusOK {
			t.Fatalf("%s (%s): exporter answered %d", n.Name, n.Life, code)
		}
		checkExporter(t, rec, n, mfs)
		kmfs, code := scrape(t, url(n, kubeletPath))
		if code != http.StatusOK {
			t.Fatalf("%s (%s): kubelet answered %d", n.Name, n.Life, code)
		}
		lastSeen := time.Unix(int64(value(t, kmfs, "kubelet_pleg_last_seen_seconds")), 0)
		// The kubelet's gauge is in whole seconds.
		fault := s.Started().Add(500 * time.Millisecond)
		if n.Life == Overflowing || n.Life == Frozen {
			if lastSeen.After(fault) {
				t.Errorf("%s (%s): the kubelet saw its PLEG at %v, after the fault at %v", n.Name, n.Life, lastSeen, fault)
			}
		} else if age := time.Since(lastSeen); age > 2100*time.Millisecond || !lastSeen.After(fault.Add(-time.Second)) {
			t.Errorf("%s (%s): the kubelet last saw its PLEG %v ago", n.Name, n.Life, age)
		}
	}
	if _, code := scrape(t, "http://"+addr+"/nodes/sim/no-such-node/metrics"); code != http.StatusNotFound {
		t.Errorf("an unknown node answered %d", code)
	}
}

func checkExporter(t *testing.T, rec *Recording, n *Node, mfs map[string]*dto.MetricFamily) {
	t.Helper()
	want := goldenFamilies(t)
	if n.Life == OldExporter {
		want = deleteAll(want, sinceOld...)
		if _, ok := mfs[sinceOld[0]]; ok {
			t.Errorf("%s: an exporter %s serves %s", n.Name, OldVersion, sinceOld[0])
		}
	}
	for _, f := range want {
		if _, ok := mfs[f]; !ok {
			t.Errorf("%s (%s): no %s, which the real exporter serves", n.Name, n.Life, f)
		}
	}
	version := Version
	if n.Life == OldExporter {
		version = OldVersion
	}
	value(t, mfs, "pleg_exporter_build_info", "version", version)
	payload := value(t, mfs, "pleg_relist_payload_bytes", "rpc", "ListContainers")
	up := value(t, mfs, "pleg_runtime_up")
	switch n.Life {
	case Overflowing:
		if payload <= float64(rec.LimitBytes) || value(t, mfs, "pleg_relist_fallback") != 1 || up != 1 {
			t.Errorf("%s: overflowing, payload %.0f, fallback %v, up %v", n.Name, payload, value(t, mfs, "pleg_relist_fallback"), up)
		}
		if got := value(t, mfs, "pleg_containers", "state", "exited"); int(got) != rec.Overflow.Steady.Containers["exited"] {
			t.Errorf("%s: %v exited containers, the recording %d", n.Name, got, rec.Overflow.Steady.Containers["exited"])
		}
	case Frozen:
		if inFlight := value(t, mfs, "pleg_relist_list_in_flight_seconds"); inFlight < 0.5 {
			t.Errorf("%s: frozen, its list in flight only %vs", n.Name, inFlight)
		}
		if seen := value(t, mfs, "pleg_last_seen_seconds"); seen < 1 {
			t.Errorf("%s: frozen, last seen %vs ago", n.Name, seen)
		}
	case Creeping:
		if r := payload / float64(rec.LimitBytes); r < 0.45 || r >= 1 {
			t.Errorf("%s: creeping at %.2f of the limit", n.Name, r)
		}
	default:
		if payload >= float64(rec.LimitBytes)/2 || up != 1 || value(t, mfs, "pleg_last_seen_seconds") > 1 {
			t.Errorf("%s (%s): payload %.0f, up %v, last seen %v", n.Name, n.Life, payload, up, value(t, mfs, "pleg_last_seen_seconds"))
		}
	}
}

func deleteAll(in []string, drop ...string) []string {
	var out []string
	for _, s := range in {
		if !contains(drop, s) {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

func TestKubeletRestart(t *testing.T) {
	s, err := New(Config{Nodes: 1, Shares: map[Life]float64{KubeletRestarting: 1}, KubeletRestartEvery: time.Hour,
		KubeletRestartDown: time.Minute}, recording(t))
	if err != nil {
		t.Fatal(err)
	}
	n := s.Nodes()[0]
	// The first restart comes KubeletRestartEvery-offset into the run.
	at := s.start.Add(time.Hour - n.offset)
	if _, down := n.kubeletStart(at.Add(-time.Second)); down {
		t.Error("down before its restart")
	}
	started, down := n.kubeletStart(at.Add(30 * time.Second))
	if !down || !started.Equal(at.Add(time.Minute)) {
		t.Errorf("30s into the restart: down %v, started %v, want true, %v", down, started, at.Add(time.Minute))
	}
	if started, down := n.kubeletStart(at.Add(2 * time.Minute)); down || !started.Equal(at.Add(time.Minute)) {
		t.Errorf("after the restart: down %v, started %v", down, started)
	}
}
