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
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/pleg-exporter/pleg_exporter/internal/measure"
)

// Sample is one reading of a server's own metrics.
type Sample struct {
	At time.Time
	// HeapInuse and RSS are go_memstats_heap_inuse_bytes and
	// process_resident_memory_bytes.
	HeapInuse, RSS float64
	HeadSeries     float64
	// RuleGroups are prometheus_rule_group_last_duration_seconds by group;
	// Missed prometheus_rule_group_iterations_missed_total.
	RuleGroups, Missed map[string]float64
}

// ReadSelf reads a Prometheus' (or Thanos Ruler's) /metrics.
func ReadSelf(ctx context.Context, s *Server) (Sample, error) {
	out := Sample{At: time.Now(), RuleGroups: map[string]float64{}, Missed: map[string]float64{}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+"/metrics", nil)
	if err != nil {
		return out, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return out, fmt.Errorf("%s/metrics: %w", s.URL(), err)
	}
	one := func(name string) float64 {
		if mf, ok := mfs[name]; ok && len(mf.GetMetric()) > 0 {
			m := mf.GetMetric()[0]
			return m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
		return 0
	}
	out.HeapInuse, out.RSS, out.HeadSeries = one("go_memstats_heap_inuse_bytes"), one("process_resident_memory_bytes"), one("prometheus_tsdb_head_series")
	for name, into := range map[string]map[string]float64{
		"prometheus_rule_group_last_duration_seconds":   out.RuleGroups,
		"prometheus_rule_group_iterations_missed_total": out.Missed,
	} {
		for _, m := range mfs[name].GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "rule_group" {
					_, group, _ := strings.Cut(lp.GetValue(), ";")
					into[group] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
				}
			}
		}
	}
	return out, nil
}

// Watch reads s every interval until ctx ends.
func Watch(ctx context.Context, s *Server, interval time.Duration) []Sample {
	var out []Sample
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if smp, err := ReadSelf(ctx, s); err == nil {
			out = append(out, smp)
		}
		select {
		case <-ctx.Done():
			return out
		case <-t.C:
		}
	}
}

// GroupStat is one rule group's evaluation time over a run.
type GroupStat struct {
	Group               string
	Median, Max, Missed float64
	MedianPct, MaxPct   float64 // of the evaluation interval
	Samples             int
}

// RuleGroups summarizes the rule groups' last durations over samples
// (every sample after skip), against the evaluation interval.
func RuleGroups(samples []Sample, interval time.Duration) []GroupStat {
	by := map[string][]float64{}
	var missed map[string]float64
	for _, s := range samples {
		for g, d := range s.RuleGroups {
			by[g] = append(by[g], d)
		}
		missed = s.Missed
	}
	var out []GroupStat
	for g, ds := range by {
		med, mx := measure.Median(ds), 0.0
		for _, d := range ds {
			mx = max(mx, d)
		}
		iv := interval.Seconds()
		out = append(out, GroupStat{Group: g, Median: med, Max: mx, Missed: missed[g], MedianPct: 100 * med / iv, MaxPct: 100 * mx / iv, Samples: len(ds)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}

// Panel is one query of a dashboard.
type Panel struct {
	Dashboard, Title, Expr string
	Instant                bool
}

// Panels reads a rendered dashboard's queries.
func Panels(name string, dashboard []byte) ([]Panel, error) {
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr    string `json:"expr"`
				Instant bool   `json:"instant"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(dashboard, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var out []Panel
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			out = append(out, Panel{Dashboard: name, Title: p.Title, Expr: t.Expr, Instant: t.Instant})
		}
	}
	return out, nil
}

var variable = regexp.MustCompile(`\$\{?(\w+)\}?`)

// Expand replaces the dashboard variables in expr: vars, and Grafana's
// $__rate_interval, $__interval and $__range for the step and range.
func Expand(expr string, vars map[string]string, step, rng time.Duration) string {
	return variable.ReplaceAllStringFunc(expr, func(m string) string {
		name := strings.Trim(m, "${}")
		switch name {
		case "__rate_interval":
			// Grafana: max(4 × the scrape interval, step + scrape interval).
			return model.Duration(max(4*15*time.Second, step+15*time.Second)).String()
		case "__interval":
			return model.Duration(step).String()
		case "__range":
			return model.Duration(rng).String()
		}
		if v, ok := vars[name]; ok {
			return v
		}
		return m
	})
}

// Timing is one panel query's wall time.
type Timing struct {
	Panel
	Median, Max time.Duration
	Series      int
	Err         error
}

// TimePanel runs a panel's query as Grafana does (an instant query at now,
// or a range query over rng ending now at step) reps times.
func TimePanel(ctx context.Context, base string, p Panel, vars map[string]string, rng, step time.Duration, reps int) Timing {
	expr := Expand(p.Expr, vars, step, rng)
	end := time.Now()
	q := url.Values{"query": {expr}}
	path := "/api/v1/query_range"
	if p.Instant {
		path = "/api/v1/query"
		q.Set("time", strconv.FormatInt(end.Unix(), 10))
	} else {
		q.Set("start", strconv.FormatInt(end.Add(-rng).Unix(), 10))
		q.Set("end", strconv.FormatInt(end.Unix(), 10))
		q.Set("step", strconv.Itoa(int(step.Seconds())))
	}
	t := Timing{Panel: p}
	var ds []float64
	for range reps {
		start := time.Now()
		n, err := run(ctx, base+path+"?"+q.Encode())
		d := time.Since(start)
		if err != nil {
			t.Err = fmt.Errorf("%s: %w", expr, err)
			return t
		}
		t.Series = n
		ds = append(ds, d.Seconds())
		t.Max = max(t.Max, d)
	}
	t.Median = time.Duration(measure.Median(ds) * float64(time.Second))
	return t
}

// run calls the query API and returns how many series answered.
func run(ctx context.Context, u string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, err
	}
	if body.Status != "success" {
		return 0, fmt.Errorf("%s: %s", resp.Status, body.Error)
	}
	return len(body.Data.Result), nil
}
