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
	"sort"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/pleg-exporter/pleg_exporter/internal/measure"
	"github.com/pleg-exporter/pleg_exporter/internal/stack"
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
	// Intervals are the groups' evaluation intervals in seconds.
	Intervals map[string]float64
}

// ReadSelf reads a Prometheus' (or Thanos Ruler's) /metrics.
func ReadSelf(ctx context.Context, s *Server) (Sample, error) {
	out := Sample{At: time.Now(), RuleGroups: map[string]float64{}, Missed: map[string]float64{}, Intervals: map[string]float64{}}
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
		"prometheus_rule_group_interval_seconds":        out.Intervals,
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

// Watch reads s every interval until ctx ends. It also stops once the
// clock passes ctx's deadline: at 1,000 nodes a run's Watch once went on
// polling 11 minutes past its deadline with ctx not yet done.
func Watch(ctx context.Context, s *Server, interval time.Duration) []Sample {
	var out []Sample
	deadline, bounded := ctx.Deadline()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if smp, err := ReadSelf(ctx, s); err == nil {
			out = append(out, smp)
		}
		select {
		case <-ctx.Done():
			return out
		case now := <-t.C:
			if bounded && !now.Before(deadline) {
				return out
			}
		}
	}
}

// GroupStat is one rule group's evaluation time over a run.
type GroupStat struct {
	Group               string
	Interval            float64 // seconds
	Median, Max, Missed float64
	MedianPct, MaxPct   float64 // of the evaluation interval
	Samples             int
}

// RuleGroups summarizes the rule groups' last durations over samples
// against each group's evaluation interval (interval where the samples do
// not name it). A group evaluated less often than it is read counts each
// evaluation as often as it was read, which leaves median and max as they are.
func RuleGroups(samples []Sample, interval time.Duration) []GroupStat {
	by := map[string][]float64{}
	var missed, intervals map[string]float64
	for _, s := range samples {
		for g, d := range s.RuleGroups {
			by[g] = append(by[g], d)
		}
		missed, intervals = s.Missed, s.Intervals
	}
	var out []GroupStat
	for g, ds := range by {
		med, mx := measure.Median(ds), 0.0
		for _, d := range ds {
			mx = max(mx, d)
		}
		iv := interval.Seconds()
		if v := intervals[g]; v > 0 {
			iv = v
		}
		out = append(out, GroupStat{Group: g, Interval: iv, Median: med, Max: mx, Missed: missed[g], MedianPct: 100 * med / iv, MaxPct: 100 * mx / iv, Samples: len(ds)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}

// Timing is one panel query's wall time.
type Timing struct {
	stack.Query
	Median, Max time.Duration
	Series      int
	Err         error `json:"-"`
}

// TimePanel runs a panel's query against api as Grafana does (an instant
// query at now, or a range query over rng ending now at step) reps times.
func TimePanel(ctx context.Context, api stack.API, q stack.Query, vars map[string]string, rng, step time.Duration, reps int) Timing {
	expr := stack.Expand(q.Expr, vars, step, rng)
	end := time.Now()
	t := Timing{Query: q}
	var ds []float64
	for range reps {
		start := time.Now()
		var err error
		if q.Instant {
			var r []stack.Sample
			r, err = api.QueryAt(ctx, expr, end)
			t.Series = len(r)
		} else {
			var r []stack.Series
			r, err = api.QueryRange(ctx, expr, end.Add(-rng), end, step)
			t.Series = len(r)
		}
		d := time.Since(start)
		if err != nil {
			t.Err = fmt.Errorf("%s: %w", expr, err)
			return t
		}
		ds = append(ds, d.Seconds())
		t.Max = max(t.Max, d)
	}
	t.Median = time.Duration(measure.Median(ds) * float64(time.Second))
	return t
}
