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
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pleg-exporter/pleg_exporter/internal/measure"
	"github.com/pleg-exporter/pleg_exporter/internal/stack"
	"github.com/pleg-exporter/pleg_exporter/mixin"
)

// thanosBinary is the Thanos make test builds (THANOS); outside CI a
// missing one skips.
func thanosBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("THANOS")
	if _, err := os.Stat(bin); bin == "" || err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("THANOS=%q: Thanos %s is not built (make test builds it after Helm)", bin, ThanosVersion)
		}
		t.Skipf("THANOS=%q: Thanos %s is not built (make test builds it)", bin, ThanosVersion)
	}
	return bin
}

// TestFleetThanos: two clusters, each a Prometheus (no rules) with its
// cluster external label and a Thanos sidecar; Thanos Query over both
// sidecars and the Ruler; Thanos Ruler evaluating the mixin's rules
// against the Query, as kube-thanos deploys it. Every faulty node of both
// clusters reaches Alertmanager with its cluster label, no other node does
// (the clusters have the same node names), and the fleet dashboard rendered
// with showMultiCluster answers through the Query with each cluster's nodes.
func TestFleetThanos(t *testing.T) {
	bin := thanosBinary(t)
	requireMonitors(t)
	dir := t.TempDir()
	clusters := []string{"east", "west"}
	s := smallFleet(t, clusters...)
	addr := serveFleet(t, s)
	am, err := StartAlertmanager(filepath.Join(dir, "am"))
	if err != nil {
		t.Fatal(err)
	}
	defer am.Stop()

	var endpoints []string
	for _, c := range clusters {
		targets := filepath.Join(dir, c+"-targets.json")
		if err := s.WriteTargets(targets, c, addr); err != nil {
			t.Fatal(err)
		}
		pdir := filepath.Join(dir, "prom-"+c)
		prom, err := StartPrometheus(PrometheusOptions{Dir: pdir, Cluster: c, TargetsFile: targets, Sidecar: true})
		if err != nil {
			t.Fatal(err)
		}
		defer prom.Stop()
		side, err := StartSidecar(bin, filepath.Join(dir, "sidecar-"+c), prom, filepath.Join(pdir, "data"), filepath.Join(pdir, "prometheus.yml"))
		if err != nil {
			t.Fatal(err)
		}
		defer side.Stop()
		endpoints = append(endpoints, side.GRPC)
	}
	rulerGRPC, err := measure.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	query, err := StartQuery(bin, filepath.Join(dir, "query"), append(endpoints, rulerGRPC)...)
	if err != nil {
		t.Fatal(err)
	}
	defer query.Stop()
	ruler, err := StartRuler(bin, filepath.Join(dir, "ruler"), rulerGRPC, query.Addr, am.Addr, 15*time.Second, rulesFiles(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer ruler.Stop()
	t.Logf("fleet: %v over %v", s.ByLife(), clusters)

	waitVerdict(t, s, am, 3*time.Minute, 7*time.Minute)
	alerts, err := Alerts(context.Background(), am)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, a := range alerts {
		seen[a.Labels["cluster"]] = true
	}
	for _, c := range clusters {
		if !seen[c] {
			t.Errorf("no alert with cluster=%q reached Alertmanager", c)
		}
	}
	checkMultiClusterDashboard(t, s, query)
}

// checkMultiClusterDashboard runs the fleet dashboard's "Nodes by risk"
// payload query, rendered with showMultiCluster, through the Query once per
// cluster: each answers with that cluster's nodes, and past the limit with
// that cluster's overflowing nodes only (the clusters' node names are the
// same, their overflowing nodes are not).
func checkMultiClusterDashboard(t *testing.T, s *Sim, query *ThanosServer) {
	t.Helper()
	files, err := mixin.RenderDashboards(filepath.Join("..", "..", "mixin"), `{ showMultiCluster: true }`)
	if err != nil {
		t.Fatal(err)
	}
	queries, err := stack.Queries("pleg-fleet.json", files["pleg-fleet.json"])
	if err != nil {
		t.Fatal(err)
	}
	expr := ""
	for _, q := range queries {
		if q.Title == "Nodes by risk" && strings.Contains(q.Expr, "payload") {
			expr = q.Expr
		}
	}
	if expr == "" {
		t.Fatal(`the fleet dashboard has no "Nodes by risk" payload query`)
	}
	overflowing := map[string][]string{}
	for _, k := range s.Keys(Overflowing) {
		c, n, _ := strings.Cut(k, "/")
		overflowing[c] = append(overflowing[c], n)
	}
	if strings.Join(overflowing["east"], " ") == strings.Join(overflowing["west"], " ") {
		t.Fatalf("both clusters overflow on %v: the check cannot tell them apart (change the seed)", overflowing["east"])
	}
	ctx := context.Background()
	for _, c := range []string{"east", "west"} {
		q := stack.Expand(expr, map[string]string{"cluster": c}, 0, 0)
		res, err := query.API().Query(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		got := map[string]float64{}
		var over []string
		for _, r := range res {
			v, _ := r.Value[1].(string)
			var f float64
			json.Unmarshal([]byte(v), &f)
			got[r.Metric["node"]] = f
			if f >= 1 {
				over = append(over, r.Metric["node"])
			}
		}
		sort.Strings(over)
		// A frozen runtime's relists measure no answer: no payload.
		for _, n := range s.Nodes() {
			if _, ok := got[n.Name]; n.Cluster == c && !ok && n.Life != Gone && n.Life != Frozen {
				t.Errorf("%s through Thanos Query: no %s (%s)", q, n.Name, n.Life)
			}
		}
		if strings.Join(over, " ") != strings.Join(overflowing[c], " ") {
			t.Errorf("%s through Thanos Query: past the limit %v, want cluster %s's %v", q, over, c, overflowing[c])
		}
	}
	t.Logf("the fleet dashboard's nodes by risk through Thanos Query: each cluster's nodes and its overflowing ones %v", overflowing)
}
