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
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pleg-exporter/pleg_exporter/internal/stack"
	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
)

func TestMain(m *testing.M) {
	testenv.CleanLeftoversOrExit()
	os.Exit(m.Run())
}

func rulesFiles(t *testing.T) []string {
	dir, err := filepath.Abs(filepath.Join("..", "..", "mixin", "generated"))
	if err != nil {
		t.Fatal(err)
	}
	return []string{filepath.Join(dir, "prometheus_rules.yaml"), filepath.Join(dir, "prometheus_alerts.yaml")}
}

// smallFleet has a node of each life per cluster, faults 45s in, with the
// per-namespace metrics on.
func smallFleet(t *testing.T, clusters ...string) *Sim {
	shares := map[Life]float64{Creeping: 0.05, Overflowing: 0.05, Frozen: 0.05, KubeletRestarting: 0.05, Gone: 0.05, OldExporter: 0.05}
	s, err := New(Config{Clusters: clusters, Nodes: 20 * len(clusters), Shares: shares, Seed: 30, FaultAfter: 45 * time.Second,
		KubeletRestartEvery: 90 * time.Second, Namespaces: true}, recording(t))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// serveFleet starts s's nodes and serves their targets on loopback until
// the test ends; it returns the address.
func serveFleet(t *testing.T, s *Sim) string {
	t.Helper()
	s.Start()
	t.Cleanup(s.Stop)
	l, err := s.Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr().String()
}

// requireMonitors skips a test that needs Debian's Prometheus and
// Alertmanager, and root for the harness's ledger, where they are missing.
func requireMonitors(t *testing.T) {
	t.Helper()
	testenv.RequireTool(t, "prometheus")
	testenv.RequireTool(t, "prometheus-alertmanager")
	if os.Geteuid() != 0 {
		t.Skip("needs root: the harness records its daemons in " + testenv.LedgerDir)
	}
}

// TestFleetAlerts: one Prometheus (Debian's, 15s scrape and evaluation,
// the rendered mixin) scraping a small simulated fleet sends Alertmanager
// an alert for every faulty node and none for the others: not for the
// restarting kubelets, not for the nodes on the older exporter, and for the
// exporters that went away only the up-based one.
func TestFleetAlerts(t *testing.T) {
	requireMonitors(t)
	dir := t.TempDir()
	s := smallFleet(t, "east")
	addr := serveFleet(t, s)
	targets := filepath.Join(dir, "targets.json")
	if err := s.WriteTargets(targets, "east", addr); err != nil {
		t.Fatal(err)
	}
	am, err := StartAlertmanager(filepath.Join(dir, "am"))
	if err != nil {
		t.Fatal(err)
	}
	defer am.Stop()
	prom, err := StartPrometheus(PrometheusOptions{Dir: filepath.Join(dir, "prom"), Cluster: "east", TargetsFile: targets,
		RuleFiles: rulesFiles(t), Alertmanagers: []string{am.Addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer prom.Stop()
	t.Logf("fleet: %v", s.ByLife())
	waitVerdict(t, s, am, 4*time.Minute, 7*time.Minute)
	checkPanels(t, s, prom)
	checkNamespaceLabels(t, prom)
}

// checkNamespaceLabels: scraped as the chart's PodMonitor scrapes (the
// target's namespace is the exporter pod's, honorLabels), the per-namespace
// series keep the namespace they count.
func checkNamespaceLabels(t *testing.T, prom *Server) {
	t.Helper()
	res, err := prom.API().Query(context.Background(), `count by (namespace, exported_namespace) (pleg_namespace_containers)`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range res {
		got = append(got, r.Metric["namespace"]+"/"+r.Metric["exported_namespace"])
	}
	sort.Strings(got)
	// fakecri.Generate's namespaces, none renamed.
	if want := "batch-jobs/ default/ kube-system/"; strings.Join(got, " ") != want {
		t.Errorf("pleg_namespace_containers by namespace/exported_namespace: %v, want %s", got, want)
	}
}

// checkPanels runs every panel of both dashboards on a node still on the
// older exporter: none fails, and the fleet dashboard lists the node.
func checkPanels(t *testing.T, s *Sim, prom *Server) {
	t.Helper()
	old := s.Keys(OldExporter)
	if len(old) == 0 {
		t.Fatal("no node on the older exporter")
	}
	_, node, _ := strings.Cut(old[0], "/")
	listed := false
	for _, d := range []string{"pleg-fleet.json", "pleg-node.json"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "dashboards", d))
		if err != nil {
			t.Fatal(err)
		}
		panels, err := stack.Queries(d, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range panels {
			tm := TimePanel(context.Background(), prom.API(), p, map[string]string{"node": node}, time.Hour, 20*time.Second, 1)
			if tm.Err != nil {
				t.Errorf("%s %q on %s (exporter %s): %v", d, p.Title, node, OldVersion, tm.Err)
			}
			if p.Title == "Nodes by risk" && strings.Contains(p.Expr, "payload") {
				res, err := prom.API().Query(context.Background(), p.Expr)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range res {
					listed = listed || r.Metric["node"] == node
				}
			}
		}
	}
	if !listed {
		t.Errorf("the fleet dashboard's nodes by risk leave out %s, on exporter %s", node, OldVersion)
	}
}

// waitVerdict polls Alertmanager until every faulty node has its alert and
// the fleet has run for watch (restarting kubelets restart twice), failing
// at once on an alert no life allows.
func waitVerdict(t *testing.T, s *Sim, am *Server, watch, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	var v Verdict
	paged := false
	for {
		alerts, err := Alerts(ctx, am)
		if err != nil {
			t.Fatal(err)
		}
		v = s.Judge(alerts)
		if len(v.Unexpected) > 0 {
			t.Fatalf("%s after %v: %s", "alerts no life allows", time.Since(s.Started()).Round(time.Second), v)
		}
		if v.OK() && !paged {
			paged = true
			t.Logf("every faulty node alerted %v after the fleet started (faults at 45s)", time.Since(s.Started()).Round(time.Second))
		}
		if v.OK() && time.Since(s.Started()) > watch {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", time.Since(s.Started()).Round(time.Second), v)
		}
		time.Sleep(5 * time.Second)
	}
	t.Logf("after %v: every faulty node alerted, no other; nodes with an alert by life: %v",
		time.Since(s.Started()).Round(time.Second), v.Alerted)
	for _, l := range []Life{Healthy, KubeletRestarting, OldExporter} {
		if v.Alerted[l] != 0 {
			t.Errorf("%d %s nodes alerted", v.Alerted[l], l)
		}
	}
}
