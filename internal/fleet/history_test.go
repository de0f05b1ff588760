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
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

func gauge(mfs []*dto.MetricFamily, name string) (float64, bool) {
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			m := mf.GetMetric()[0]
			return m.GetGauge().GetValue() + m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

// TestHistory: a fleet lived for 40 virtual minutes on the virtual clock
// shows each life as the wall-clock fleet does, step by step, and goes on
// from there on the wall clock without a reset.
func TestHistory(t *testing.T) {
	shares := map[Life]float64{Creeping: 0.05, Overflowing: 0.05, Frozen: 0.05, KubeletRestarting: 0.05, Gone: 0.05, OldExporter: 0.05}
	start := time.Now().Add(-40 * time.Minute)
	s, err := New(Config{Nodes: 20, Shares: shares, Seed: 30, FaultAfter: 10 * time.Minute, KubeletRestartEvery: 5 * time.Minute,
		Start: start}, recording(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	fault := start.Add(10 * time.Minute)
	scrapes, down := map[Life]int{}, map[Life]int{}
	var maxHung float64
	_, err = s.CatchUp(context.Background(), 15*time.Second, func(at time.Time, _ string, target map[string]string, mfs []*dto.MetricFamily) error {
		n := s.byKey["sim/"+target["node"]]
		if target["job"] == "kubelet" {
			if mfs == nil {
				down[KubeletRestarting]++
			}
			return nil
		}
		if mfs == nil {
			down[n.Life]++
			return nil
		}
		scrapes[n.Life]++
		seen, _ := gauge(mfs, "pleg_last_seen_seconds")
		inFlight, hasInFlight := gauge(mfs, "pleg_relist_list_in_flight_seconds")
		failing := (n.Life == Frozen || n.Life == Overflowing) && at.After(fault)
		switch {
		case failing && at.After(fault.Add(30*time.Second)) && seen < at.Sub(fault).Seconds()-11:
			return fmt.Errorf("%s (%s) at %v: last seen %vs ago, the fault was %v ago", n.Name, n.Life, at.Sub(start), seen, at.Sub(fault))
		case !failing && at.After(start.Add(time.Minute)) && seen > 12:
			return fmt.Errorf("%s (%s) at %v: last seen %vs ago", n.Name, n.Life, at.Sub(start), seen)
		case n.Life == OldExporter && hasInFlight:
			return fmt.Errorf("%s: exporter %s with %s", n.Name, OldVersion, sinceOld[0])
		case n.Life == Frozen && at.After(fault):
			maxHung = max(maxHung, inFlight)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if maxHung < 100 || maxHung > 120 {
		t.Errorf("a frozen runtime's list in flight reached %vs, want up to its 2m deadline", maxHung)
	}
	steps := int(time.Since(start) / (15 * time.Second))
	if want := steps - int(fault.Sub(start)/(15*time.Second)) - 1; down[Gone] < want {
		t.Errorf("the gone exporter did not answer %d scrapes, want %d", down[Gone], want)
	}
	if down[KubeletRestarting] == 0 || down[KubeletRestarting] > steps/2 {
		t.Errorf("the restarting kubelet was down for %d of %d scrapes", down[KubeletRestarting], steps)
	}
	t.Logf("%d steps: exporter scrapes by life %v, missed %v; a frozen runtime's list in flight up to %.0fs", steps, scrapes, down, maxHung)
	continuesOnWallClock(t, s)
}

// continuesOnWallClock: after History the nodes relist on the wall clock,
// their counters going on from the virtual ones.
func continuesOnWallClock(t *testing.T, s *Sim) {
	var n *Node
	for _, x := range s.Nodes() {
		if x.Life == Healthy {
			n = x
			break
		}
	}
	before, _ := n.product.Gather()
	relists, _ := gauge(before, "pleg_relists_total")
	if relists < 200 {
		t.Fatalf("%s relisted %v times in 40 virtual minutes", n.Name, relists)
	}
	addr := serveFleet(t, s)
	time.Sleep(time.Second)
	mfs, code := scrape(t, "http://"+addr+fmt.Sprintf(exporterPath, n.Cluster, n.Name))
	if code != http.StatusOK {
		t.Fatalf("%s answered %d", n.Name, code)
	}
	if got := value(t, mfs, "pleg_relists_total"); got < relists {
		t.Errorf("pleg_relists_total %v on the wall clock, %v at the end of the history", got, relists)
	}
	if seen := value(t, mfs, "pleg_last_seen_seconds"); seen > 11 {
		t.Errorf("on the wall clock, last seen %vs ago", seen)
	}
}
