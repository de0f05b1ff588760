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
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// Panel is what one dashboard panel's queries returned.
type Panel struct {
	Dashboard, Title string
	Queries          int
	WithData         int      // queries that returned at least one series
	Errors           []string // queries that failed, with the error
}

// Variable is a dashboard's query variable: label_values(Selector, Label).
type Variable struct {
	Dashboard, Name, Selector, Label string
	Hidden                           bool // Grafana hides its label (1) or all of it (2)
}

var labelValuesRE = regexp.MustCompile(`^label_values\((.*),\s*(\w+)\)$`)

// Query is one query of a dashboard's panel, as Grafana sends it.
type Query struct {
	Dashboard, Title, Expr string
	// Instant is a query at the dashboard's end time only (tables, stats);
	// otherwise Grafana runs it over the range.
	Instant bool
}

// dashboard is the part of a dashboard's JSON the checks read.
type dashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr    string `json:"expr"`
			Instant bool   `json:"instant"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Hide  int             `json:"hide"`
			Query json.RawMessage `json:"query"` // an object for a query variable, a string for a datasource
		} `json:"list"`
	} `json:"templating"`
}

func parseDashboard(name string, raw []byte) (*dashboard, error) {
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &d, nil
}

func readDashboard(path string) (*dashboard, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseDashboard(path, raw)
}

func (d *dashboard) queries(name string) []Query {
	var out []Query
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			out = append(out, Query{Dashboard: name, Title: p.Title, Expr: t.Expr, Instant: t.Instant})
		}
	}
	return out
}

// Queries lists every query of every panel of a rendered dashboard, named
// name, in the panels' order.
func Queries(name string, raw []byte) ([]Query, error) {
	d, err := parseDashboard(name, raw)
	if err != nil {
		return nil, err
	}
	return d.queries(name), nil
}

// ScrapeInterval is the scrape interval Grafana's $__rate_interval assumes
// (the mixin's and kube-prometheus-stack's default).
const ScrapeInterval = 15 * time.Second

var varRE = regexp.MustCompile(`\$\{?(\w+)\}?`)

// Expand fills in expr's dashboard variables: those in vars first, then
// Grafana's own for a query at step over rng ($__rate_interval,
// $__interval, $__range). A variable it does not know stays as it is.
func Expand(expr string, vars map[string]string, step, rng time.Duration) string {
	return varRE.ReplaceAllStringFunc(expr, func(m string) string {
		name := strings.Trim(m, "${}")
		if v, ok := vars[name]; ok {
			return v
		}
		switch name {
		case "__rate_interval":
			// Grafana: max(4 × the scrape interval, step + the scrape interval).
			return model.Duration(max(4*ScrapeInterval, step+ScrapeInterval)).String()
		case "__interval":
			if step > 0 {
				return model.Duration(step).String()
			}
		case "__range":
			if rng > 0 {
				return model.Duration(rng).String()
			}
		}
		return m
	})
}

// Variables lists the query variables of the dashboards in files.
func Variables(files []string) ([]Variable, error) {
	var out []Variable
	for _, f := range files {
		d, err := readDashboard(f)
		if err != nil {
			return nil, err
		}
		vs, err := d.variables(filepath.Base(f))
		if err != nil {
			return nil, err
		}
		out = append(out, vs...)
	}
	return out, nil
}

// VariablesOf lists the query variables of a rendered dashboard named name.
func VariablesOf(name string, raw []byte) ([]Variable, error) {
	d, err := parseDashboard(name, raw)
	if err != nil {
		return nil, err
	}
	return d.variables(name)
}

func (d *dashboard) variables(name string) ([]Variable, error) {
	var out []Variable
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			return nil, fmt.Errorf("%s: variable %s: %w", name, v.Name, err)
		}
		m := labelValuesRE.FindStringSubmatch(q.Query)
		if m == nil {
			return nil, fmt.Errorf("%s: variable %s: query %q is not label_values(selector, label)", name, v.Name, q.Query)
		}
		out = append(out, Variable{Dashboard: name, Name: v.Name, Selector: m[1], Label: m[2], Hidden: v.Hide != 0})
	}
	return out, nil
}

// LabelValues is what Grafana's label_values(selector, label) offers.
func (a API) LabelValues(ctx context.Context, selector, label string) ([]string, error) {
	data, err := a.data(ctx, "/api/v1/label/"+url.PathEscape(label)+"/values?match[]="+url.QueryEscape(selector))
	if err != nil {
		return nil, err
	}
	var out []string
	return out, json.Unmarshal(data, &out)
}

// RunDashboards runs every query of every panel of the dashboards in
// files as an instant query, each variable filled in by Expand from vars.
func (a API) RunDashboards(ctx context.Context, files []string, vars map[string]string) ([]Panel, error) {
	var out []Panel
	for _, f := range files {
		d, err := readDashboard(f)
		if err != nil {
			return nil, err
		}
		for _, p := range d.Panels {
			res := Panel{Dashboard: filepath.Base(f), Title: p.Title}
			for _, q := range p.Targets {
				res.Queries++
				expr := Expand(q.Expr, vars, 0, 0)
				r, err := a.Query(ctx, expr)
				switch {
				case err != nil:
					res.Errors = append(res.Errors, fmt.Sprintf("%v: %s", err, expr))
				case len(r) > 0:
					res.WithData++
				}
			}
			out = append(out, res)
		}
	}
	return out, nil
}

// CheckPanels sums up what the panels returned: the queries run, the panels
// without data, and a problem for every failed query and every empty panel
// mayBeEmpty does not name.
func CheckPanels(panels []Panel, mayBeEmpty map[string]bool) (queries int, empty, problems []string) {
	for _, p := range panels {
		queries += p.Queries
		for _, e := range p.Errors {
			problems = append(problems, fmt.Sprintf("%s / %q: query error: %s", p.Dashboard, p.Title, e))
		}
		if p.WithData == 0 {
			empty = append(empty, p.Dashboard+" / "+p.Title)
			if !mayBeEmpty[p.Title] {
				problems = append(problems, fmt.Sprintf("%s / %q: no query returns data", p.Dashboard, p.Title))
			}
		}
	}
	return queries, empty, problems
}

// Alert is an alert as Prometheus' /api/v1/alerts shows it.
type Alert struct {
	Labels   map[string]string `json:"labels"`
	State    string            `json:"state"`
	ActiveAt time.Time         `json:"activeAt"`
}

// Alerts are the alerts pending or firing in Prometheus.
func (a API) Alerts(ctx context.Context) ([]Alert, error) {
	data, err := a.data(ctx, "/api/v1/alerts")
	if err != nil {
		return nil, err
	}
	var out struct {
		Alerts []Alert `json:"alerts"`
	}
	return out.Alerts, json.Unmarshal(data, &out)
}
