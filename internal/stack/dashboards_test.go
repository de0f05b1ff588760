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

package stack

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The committed dashboards' query variables parse as label_values over the
// exporter's series; the datasource variable is not one.
func TestVariablesOfTheDashboards(t *testing.T) {
	files, _ := filepath.Glob("../../dashboards/*.json")
	if len(files) < 2 {
		t.Fatalf("dashboards: %v", files)
	}
	vars, err := Variables(files)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range vars {
		got[v.Dashboard+"/"+v.Name] = fmt.Sprintf("%s by %s hidden=%v", v.Selector, v.Label, v.Hidden)
	}
	want := map[string]string{
		"pleg-node.json/cluster":  `pleg_runtime_up{job="pleg-exporter"} by cluster hidden=true`,
		"pleg-node.json/node":     `pleg_runtime_up{job="pleg-exporter"} by node hidden=false`,
		"pleg-fleet.json/cluster": `pleg_runtime_up{job="pleg-exporter"} by cluster hidden=true`,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("variables:\n got %v\nwant %v", got, want)
	}
}

// A failed query and an empty panel are problems; an empty panel the
// caller allows is only listed.
func TestCheckPanels(t *testing.T) {
	panels := []Panel{
		{Dashboard: "d", Title: "ok", Queries: 2, WithData: 1},
		{Dashboard: "d", Title: "broken", Queries: 1, WithData: 1, Errors: []string{"parse error"}},
		{Dashboard: "d", Title: "empty", Queries: 1},
		{Dashboard: "d", Title: "Docker", Queries: 3},
	}
	queries, empty, problems := CheckPanels(panels, map[string]bool{"Docker": true})
	if queries != 7 || fmt.Sprint(empty) != "[d / empty d / Docker]" || len(problems) != 2 {
		t.Errorf("queries %d, empty %v, problems %q", queries, empty, problems)
	}
}

// Expand fills in the caller's variables before Grafana's own, and Grafana's
// $__rate_interval follows the step as Grafana computes it.
func TestExpand(t *testing.T) {
	for _, c := range []struct {
		expr      string
		vars      map[string]string
		step, rng time.Duration
		want      string
	}{
		{`rate(x{node="$node"}[$__rate_interval])`, map[string]string{"node": "n1"}, 20 * time.Second, time.Hour, `rate(x{node="n1"}[1m])`},
		{`rate(x[$__rate_interval])`, nil, 2 * time.Minute, time.Hour, `rate(x[2m15s])`},
		{`rate(x[$__rate_interval])`, map[string]string{"__rate_interval": "30s"}, time.Minute, 0, `rate(x[30s])`},
		{`max_over_time(x[$__range]) / ${__interval}`, nil, 30 * time.Second, 6 * time.Hour, `max_over_time(x[6h]) / 30s`},
		{`x[$__range] {c="${cluster}"} $unknown`, map[string]string{"cluster": "east"}, 0, 0, `x[$__range] {c="east"} $unknown`},
	} {
		if got := Expand(c.expr, c.vars, c.step, c.rng); got != c.want {
			t.Errorf("Expand(%q, %v, %v, %v) = %q, want %q", c.expr, c.vars, c.step, c.rng, got, c.want)
		}
	}
}

// Queries reads every committed dashboard's queries in the panels' order,
// tables and stats as instant queries, and refuses what is not JSON.
func TestQueries(t *testing.T) {
	raw, err := os.ReadFile("../../dashboards/pleg-fleet.json")
	if err != nil {
		t.Fatal(err)
	}
	qs, err := Queries("pleg-fleet.json", raw)
	if err != nil {
		t.Fatal(err)
	}
	instant, ranged := 0, 0
	for _, q := range qs {
		if q.Dashboard != "pleg-fleet.json" || q.Title == "" || q.Expr == "" {
			t.Errorf("query %+v", q)
		}
		if q.Instant {
			instant++
		} else {
			ranged++
		}
	}
	if instant == 0 || ranged == 0 {
		t.Errorf("pleg-fleet.json: %d instant and %d range queries, want both", instant, ranged)
	}
	if _, err := Queries("broken.json", []byte(`{"panels": [`)); err == nil || !strings.Contains(err.Error(), "broken.json") {
		t.Errorf("broken JSON: err %v, want one naming the file", err)
	}
}
