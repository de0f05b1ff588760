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

package mixin

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-jsonnet/formatter"
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"sigs.k8s.io/yaml"

	"github.com/pleg-exporter/pleg_exporter/internal/stack"
)

const root = ".."

func rendered(t *testing.T) map[string][]byte {
	t.Helper()
	files, err := Render(".")
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// The committed outputs are what the sources render to.
func TestGeneratedFilesUpToDate(t *testing.T) {
	for _, name := range Names(rendered(t)) {
		want := rendered(t)[name]
		got, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Errorf("%s: %v (run make mixin)", name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run make mixin and commit the result", name)
		}
	}
	// No stray dashboards either.
	entries, _ := filepath.Glob(filepath.Join(root, "dashboards", "*.json"))
	for _, e := range entries {
		if _, ok := rendered(t)[filepath.Join("dashboards", filepath.Base(e))]; !ok {
			t.Errorf("%s is not rendered from the mixin", e)
		}
	}
}

func TestJsonnetFormatted(t *testing.T) {
	var files []string
	filepath.Walk(".", func(p string, info os.FileInfo, err error) error {
		if err == nil && (strings.HasSuffix(p, ".libsonnet") || strings.HasSuffix(p, ".jsonnet")) {
			files = append(files, p)
		}
		return nil
	})
	if len(files) < 5 {
		t.Fatalf("found only %d jsonnet files", len(files))
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := formatter.Format(f, string(src), formatter.DefaultOptions())
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if got != string(src) {
			t.Errorf("%s is not jsonnetfmt-formatted: run make jsonnetfmt", f)
		}
	}
}

type ruleFile struct {
	Groups []ruleGroup `json:"groups"`
}

type ruleGroup struct {
	Name     string `json:"name"`
	Interval string `json:"interval"`
	Rules    []struct {
		Alert       string            `json:"alert"`
		Record      string            `json:"record"`
		Expr        string            `json:"expr"`
		For         string            `json:"for"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"rules"`
}

func loadRules(t *testing.T, name string) ruleFile {
	t.Helper()
	var rf ruleFile
	if err := yaml.Unmarshal(rendered(t)[name], &rf); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return rf
}

// mixtool's lint rules (monitoring-mixins/mixtool pkg/mixer/lint.go),
// reproduced, plus the runbook anchors.
var (
	camelCase  = regexp.MustCompile(`^([A-Z]+[a-z0-9]+)+$`)
	goTemplate = regexp.MustCompile(`\{\{.+}\}`)
	sentence   = regexp.MustCompile(`^[A-Z].+\.$`)
)

func TestAlertsLint(t *testing.T) {
	runbook, err := os.ReadFile(filepath.Join(root, "docs", "runbooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (\S+)`).FindAllStringSubmatch(string(runbook), -1) {
		anchors[strings.ToLower(m[1])] = true
	}
	rf := loadRules(t, "mixin/generated/prometheus_alerts.yaml")
	n := 0
	for _, g := range rf.Groups {
		if len(g.Rules) > 20 {
			t.Errorf("group %s has %d rules (> 20)", g.Name, len(g.Rules))
		}
		if len(g.Name) > 40 {
			t.Errorf("group name %s longer than 40", g.Name)
		}
		for _, r := range g.Rules {
			n++
			if !camelCase.MatchString(r.Alert) || len(r.Alert) > 40 {
				t.Errorf("alert name %q: want CamelCase of at most 40 characters", r.Alert)
			}
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q", r.Alert, s)
			}
			sum, desc := r.Annotations["summary"], r.Annotations["description"]
			if sum == "" || goTemplate.MatchString(sum) || !sentence.MatchString(sum) {
				t.Errorf("%s: summary %q must be one plain sentence without templates", r.Alert, sum)
			}
			if !goTemplate.MatchString(desc) {
				t.Errorf("%s: description %q has no template", r.Alert, desc)
			}
			url := r.Annotations["runbook_url"]
			anchor := url[strings.LastIndex(url, "#")+1:]
			if !strings.Contains(url, "docs/runbooks.md#") || !anchors[anchor] {
				t.Errorf("%s: runbook_url %q has no section in docs/runbooks.md", r.Alert, url)
			}
			if anchor != strings.ToLower(r.Alert) {
				t.Errorf("%s: runbook anchor %q", r.Alert, anchor)
			}
		}
	}
	if n < 10 {
		t.Errorf("only %d alerts", n)
	}
}

var identRE = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)

// knownMetrics: the exporter's exposition (golden files), the recording
// rules, the kubelet's PLEG metrics and up.
func knownMetrics(t *testing.T) map[string]bool {
	t.Helper()
	known := map[string]bool{"up": true,
		"kubelet_pleg_relist_duration_seconds_bucket": true, "kubelet_pleg_relist_interval_seconds_bucket": true,
		"kubelet_pleg_last_seen_seconds": true, "kubelet_running_containers": true, "kubelet_running_pods": true,
		// pkg/kubelet/metrics (EventedPLEGConnErrKey), v1.26-v1.37.
		"kubelet_evented_pleg_connection_error_count": true,
	}
	goldens, _ := filepath.Glob(filepath.Join(root, "testdata", "*.prom"))
	for _, g := range goldens {
		b, _ := os.ReadFile(g)
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
				known[f[2]] = true
				if f[3] == "histogram" {
					for _, s := range []string{"_bucket", "_sum", "_count"} {
						known[f[2]+s] = true
					}
				}
			}
		}
	}
	// What the collector declares, for metrics newer than the golden files
	// (a typo in the mixin still fails: the name must be in the source).
	sources, _ := filepath.Glob(filepath.Join(root, "collector", "*.go"))
	for _, f := range sources {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, _ := os.ReadFile(f)
		for _, m := range declaredRE.FindAllSubmatch(b, -1) {
			known[string(m[1])] = true
		}
		for _, m := range histogramRE.FindAllSubmatch(b, -1) {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				known[string(m[1])+s] = true
			}
		}
	}
	for _, g := range loadRules(t, "mixin/generated/prometheus_rules.yaml").Groups {
		for _, r := range g.Rules {
			known[r.Record] = true
		}
	}
	return known
}

var (
	declaredRE  = regexp.MustCompile(`(?:NewDesc\(|Name:)\s*"(pleg_[a-z0-9_]+)"`)
	histogramRE = regexp.MustCompile(`HistogramOpts\{\s*Name:\s*"(pleg_[a-z0-9_]+)"`)
)

func metricNames(expr string) []string {
	var out []string
	for _, id := range identRE.FindAllString(expr, -1) {
		if strings.HasPrefix(id, "pleg_") || strings.HasPrefix(id, "kubelet_") || strings.Contains(id, ":") || id == "up" {
			out = append(out, id)
		}
	}
	return out
}

func TestRuleExpressionsUseKnownMetrics(t *testing.T) {
	known := knownMetrics(t)
	for _, f := range []string{"mixin/generated/prometheus_alerts.yaml", "mixin/generated/prometheus_rules.yaml"} {
		for _, g := range loadRules(t, f).Groups {
			for _, r := range g.Rules {
				for _, m := range metricNames(r.Expr) {
					if !known[m] {
						t.Errorf("%s%s: unknown metric %s", r.Alert, r.Record, m)
					}
				}
			}
		}
	}
}

// TestGroupEvalOrder: the order the unit tests evaluate the groups in
// (stack.GroupEvalOrder, and every test file's group_eval_order) names
// every group, and each group reads only records of the groups before it
// or of its own rules before the reading one, as one Prometheus evaluation
// of them in that order would have them. promtool's unit tests evaluate a
// group left out of the order first, so a new group left out reads stale
// records in the tests alone.
func TestGroupEvalOrder(t *testing.T) {
	pos := map[string]int{}
	for i, g := range stack.GroupEvalOrder {
		pos[g] = i
	}
	recordedIn := map[string]string{}
	var groups []ruleGroup
	for _, f := range []string{"mixin/generated/prometheus_rules.yaml", "mixin/generated/prometheus_alerts.yaml"} {
		groups = append(groups, loadRules(t, f).Groups...)
	}
	for _, g := range groups {
		if _, ok := pos[g.Name]; !ok {
			t.Errorf("group %s is not in stack.GroupEvalOrder", g.Name)
		}
		for _, r := range g.Rules {
			if r.Record != "" {
				recordedIn[r.Record] = g.Name
			}
		}
	}
	for _, g := range groups {
		seen := map[string]bool{}
		for _, r := range g.Rules {
			for _, m := range metricNames(r.Expr) {
				from, ok := recordedIn[m]
				switch {
				case !ok:
				case from == g.Name && !seen[m]:
					t.Errorf("%s%s in %s reads %s, recorded after it in the same group", r.Alert, r.Record, g.Name, m)
				case from != g.Name && pos[from] > pos[g.Name]:
					t.Errorf("%s%s in %s reads %s of %s, a group evaluated after it", r.Alert, r.Record, g.Name, m, from)
				}
			}
			seen[r.Record] = true
		}
	}
	files, _ := filepath.Glob(filepath.Join(root, "mixin", "tests", "*.yaml"))
	recorded, _ := filepath.Glob(filepath.Join(root, "testdata", "kubelets", "*.yaml"))
	for _, f := range append(files, recorded...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var tf struct {
			Order []string `json:"group_eval_order"`
		}
		if err := yaml.Unmarshal(b, &tf); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if strings.Join(tf.Order, " ") != strings.Join(stack.GroupEvalOrder, " ") {
			t.Errorf("%s: group_eval_order %q, want stack.GroupEvalOrder %q", f, tf.Order, stack.GroupEvalOrder)
		}
	}
}

func TestDashboards(t *testing.T) {
	plugins.RegisterDefaultPlugins()
	known := knownMetrics(t)
	files := rendered(t)
	var names []string
	for n := range files {
		if strings.HasPrefix(n, "dashboards/") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	if len(names) < 2 {
		t.Fatalf("dashboards: %v", names)
	}
	uids := map[string]bool{}
	for _, n := range names {
		var d dashboard.Dashboard
		err := d.UnmarshalJSONStrict(files[n])
		if errs, ok := err.(cog.BuildErrors); ok && len(errs) == 0 {
			err = nil // the SDK reports success as an empty error list
		}
		if err != nil {
			t.Errorf("%s: strict decode: %v", n, err)
			continue
		}
		if err := d.Validate(); err != nil {
			if errs, ok := err.(cog.BuildErrors); !ok || len(errs) > 0 {
				t.Errorf("%s: validate: %v", n, err)
			}
		}
		if d.Uid == nil || *d.Uid == "" || len(*d.Uid) > 40 || d.Title == nil || *d.Title == "" {
			t.Errorf("%s: uid/title missing", n)
		} else if uids[*d.Uid] {
			t.Errorf("%s: duplicate uid %s", n, *d.Uid)
		} else {
			uids[*d.Uid] = true
		}
		if d.SchemaVersion != 39 {
			t.Errorf("%s: schemaVersion %d", n, d.SchemaVersion)
		}
		var raw struct {
			Templating struct {
				List []struct{ Name, Type string } `json:"list"`
			} `json:"templating"`
			Panels []struct {
				Title       string          `json:"title"`
				Description string          `json:"description"`
				Datasource  json.RawMessage `json:"datasource"`
				FieldConfig struct {
					Defaults struct {
						Unit string `json:"unit"`
					} `json:"defaults"`
					Overrides []json.RawMessage `json:"overrides"`
				} `json:"fieldConfig"`
				Targets []struct {
					Expr       string          `json:"expr"`
					Datasource json.RawMessage `json:"datasource"`
				} `json:"targets"`
			} `json:"panels"`
		}
		json.Unmarshal(files[n], &raw)
		if len(raw.Templating.List) == 0 || raw.Templating.List[0].Name != "datasource" || raw.Templating.List[0].Type != "datasource" {
			t.Errorf("%s: first variable must be the datasource", n)
		}
		for _, p := range raw.Panels {
			if p.Description == "" {
				t.Errorf("%s: panel %q has no description", n, p.Title)
			}
			if !strings.Contains(string(p.Datasource), "${datasource}") {
				t.Errorf("%s: panel %q does not use the datasource variable", n, p.Title)
			}
			if p.FieldConfig.Defaults.Unit == "" && len(p.FieldConfig.Overrides) == 0 {
				t.Errorf("%s: panel %q has no unit", n, p.Title)
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", n, p.Title)
			}
			for _, q := range p.Targets {
				if strings.Contains(q.Expr, "rate(") && !strings.Contains(q.Expr, "$__rate_interval") {
					t.Errorf("%s: %q: rate without $__rate_interval", n, q.Expr)
				}
				for _, m := range metricNames(q.Expr) {
					if !known[m] {
						t.Errorf("%s: panel %q: unknown metric %s", n, p.Title, m)
					}
				}
			}
		}
	}
}

// TestMultiClusterDashboards: with showMultiCluster every query of every
// dashboard selects the chosen cluster, and the cluster variable shows.
func TestMultiClusterDashboards(t *testing.T) {
	files, err := RenderDashboards(".", `{ showMultiCluster: true }`)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 {
		t.Fatalf("dashboards: %d", len(files))
	}
	for name, body := range files {
		vars, err := stack.VariablesOf(name, body)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vars {
			if v.Name == "cluster" && v.Hidden {
				t.Errorf("%s: the cluster variable is hidden", name)
			}
		}
		queries, err := stack.Queries(name, body)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, q := range queries {
			n++
			if !strings.Contains(q.Expr, `cluster="$cluster"`) {
				t.Errorf("%s: %q: %s selects no cluster", name, q.Title, q.Expr)
			}
		}
		if n == 0 {
			t.Errorf("%s: no query", name)
		}
	}
	single, err := RenderDashboards(".", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range single {
		if want := rendered(t)[filepath.Join("dashboards", name)]; !bytes.Equal(body, want) {
			t.Errorf("%s: rendered with no override differs from the committed one", name)
		}
	}
}
