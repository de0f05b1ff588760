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

package cluster

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pleg-exporter/pleg_exporter/internal/stack"
)

// mayBeEmpty are the panels a containerd node with no suspect sandbox has
// nothing for: the Docker view, the status probes of suspects, and a
// forecast that needs hours of history.
var mayBeEmpty = map[string]bool{
	"Docker containers by state":  true,
	"Status probes":               true,
	"Predicted time to the limit": true,
}

// dashboards runs the dashboards against the operator's Prometheus as
// Grafana would: each query variable from its label_values over what the
// PodMonitor produced (node: this node; cluster, hidden unless
// showMultiCluster: none, the operator's cluster label being an external
// label that queries do not see), then every query of every panel with
// those values. No query may fail, and every panel but mayBeEmpty's has
// data.
func dashboards(t *testing.T, ctx context.Context, c *Cluster) {
	t.Helper()
	api := c.monitoring.API()
	files, _ := filepath.Glob(filepath.Join(repo, "dashboards", "*.json"))
	vars, err := stack.Variables(files)
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]string{"__rate_interval": "1m"}
	for _, v := range vars {
		got, err := api.LabelValues(ctx, v.Selector, v.Label)
		if err != nil {
			t.Fatalf("%s: variable %s: %v", v.Dashboard, v.Name, err)
		}
		switch {
		case v.Name == "node" && (len(got) != 1 || got[0] != Node):
			t.Errorf("%s: variable node offers %v, want [%s]", v.Dashboard, got, Node)
		case v.Name == "cluster" && (!v.Hidden || len(got) != 0):
			t.Errorf("%s: variable cluster (hidden %v) offers %v, want it hidden and empty (cluster is an external label here)", v.Dashboard, v.Hidden, got)
		}
		t.Logf("%s: variable %s = label_values(%s, %s) → %v", v.Dashboard, v.Name, v.Selector, v.Label, got)
		values[v.Name] = strings.Join(got, "|")
	}
	panels, err := api.RunDashboards(ctx, files, values)
	if err != nil {
		t.Fatal(err)
	}
	queries, empty, problems := stack.CheckPanels(panels, mayBeEmpty)
	for _, p := range problems {
		t.Error(p)
	}
	t.Logf("dashboards through the operator's Prometheus: %d panels, %d queries, no error; without data: %v", len(panels), queries, empty)
}
