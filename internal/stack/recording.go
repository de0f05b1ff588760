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
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Recording turns what a live Prometheus scraped during a test into a
// promtool test of the rendered mixin: the series, and at each check the
// alerts the live Prometheus had firing then. Replayed by make test, it
// proves the rules still fire, and stay quiet, as they did live.
type Recording struct {
	Start time.Time
	// Hold keeps each checked state for three evaluation steps before the
	// test goes on, so that the recorded test has a step away from its
	// transitions.
	Hold   bool
	checks []recordedCheck
}

type recordedCheck struct {
	name string
	at   time.Time
}

// Check marks a moment whose firing alerts the recording must reproduce.
func (r *Recording) Check(name string, at time.Time) {
	r.checks = append(r.checks, recordedCheck{name, at})
	if r.Hold {
		time.Sleep(45 * time.Second)
	}
}

// RecordedSeries are the inputs of the mixin's rules: the exporter's
// series but its histograms, and the kubelet's PLEG series, version and
// gates.
var RecordedSeries = []string{
	`{job="pleg-exporter", __name__=~"pleg_.*", __name__!~".*_bucket|.*_sum|.*_count"}`,
	`{job="kubelet", __name__=~"kubelet_pleg_last_seen_seconds|kubelet_pleg_relist_interval_seconds_bucket"}`,
	`kubernetes_feature_enabled{job="kubelet", name=~"CRIListStreaming|EventedPLEG"}`,
	`kubernetes_build_info{job="kubelet"}`,
	`up`,
}

// RecordedAlerts is the query each check of a recording asserts.
const RecordedAlerts = `count by (alertname, severity) (ALERTS{alertstate="firing"})`

// RecordingFile describes the promtool test a Recording writes.
type RecordingFile struct {
	// Name is the test's name; the checks are appended to it.
	Name string
	// Header is the file's comment, one line per element.
	Header []string
	// RuleFiles are the rendered rules, relative to the file.
	RuleFiles []string
}

// GroupEvalOrder is the mixin's groups in the order one evaluation runs
// them: each group reads the recording rules of the ones before it.
var GroupEvalOrder = []string{"pleg-exporter.rules", "pleg-exporter.slow.rules", "pleg-kubelet.rules", "pleg-exporter", "pleg-exporter.slow", "pleg-kubelet", "pleg-kubelet.slow"}

type recordedInput struct {
	Series string `json:"series"`
	Values string `json:"values"`
}

type recordedSample struct {
	Labels string  `json:"labels"`
	Value  float64 `json:"value"`
}

type recordedExpr struct {
	Expr     string           `json:"expr"`
	EvalTime string           `json:"eval_time"`
	Samples  []recordedSample `json:"exp_samples"`
}

// Write records every series from the recording's start until now at its
// 15 s evaluation steps ("_" before a series began, "stale" in a gap after)
// and the alerts at each check, writes the promtool test to path and runs
// it. It returns how many series and checks it wrote.
func (r *Recording) Write(ctx context.Context, a API, path string, f RecordingFile) (string, error) {
	const step = 15 * time.Second
	start := r.Start.Truncate(step)
	end := time.Now()
	inputs, err := r.inputs(ctx, a, start, end, step)
	if err != nil {
		return "", err
	}
	var tests []recordedExpr
	var names []string
	for i, c := range r.checks {
		// The state checked is the one the test held (Hold) right after
		// the check, never a later one: searched up to the next check, a
		// check whose alerts kept changing was recorded at whatever state
		// held still next, the next scenario's.
		at, res, ok, err := steady(ctx, a, start, c, step, checkUntil(r.checks, i, end))
		if err != nil {
			return "", fmt.Errorf("record %s: %w", c.name, err)
		}
		if !ok {
			return "", fmt.Errorf("record %s: the alerts changed at every step within %v of the check", c.name, checkWindow)
		}
		samples := []recordedSample{}
		for _, s := range res {
			v, _ := s.Value[1].(string)
			n, _ := strconv.ParseFloat(v, 64)
			samples = append(samples, recordedSample{Labels: fmt.Sprintf("{alertname=%q, severity=%q}", s.Metric["alertname"], s.Metric["severity"]), Value: n})
		}
		sort.Slice(samples, func(i, j int) bool { return samples[i].Labels < samples[j].Labels })
		tests = append(tests, recordedExpr{Expr: RecordedAlerts, EvalTime: at.Sub(start).String(), Samples: samples})
		names = append(names, fmt.Sprintf("%s at %s", c.name, at.Sub(start)))
	}
	file := map[string]any{
		"rule_files":          f.RuleFiles,
		"evaluation_interval": "15s",
		"group_eval_order":    GroupEvalOrder,
		"tests": []map[string]any{{
			"name":             f.Name + ": " + strings.Join(names, "; "),
			"interval":         "15s",
			"input_series":     inputs,
			"promql_expr_test": tests,
		}},
	}
	b, err := json.MarshalIndent(file, "", " ")
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	for _, h := range f.Header {
		fmt.Fprintf(&out, "# %s\n", h)
	}
	out.Write(b)
	out.WriteByte('\n')
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		return "", err
	}
	// The recorded test must pass on the rules as rendered.
	cmd := exec.CommandContext(ctx, "promtool", "test", "rules", filepath.Base(path))
	cmd.Dir = filepath.Dir(path)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("promtool test rules %s: %v\n%s", path, err, b)
	}
	return fmt.Sprintf("%d series over %s and %d checks", len(inputs), end.Sub(start).Round(time.Second), len(tests)), nil
}

func (r *Recording) inputs(ctx context.Context, a API, start, end time.Time, step time.Duration) ([]recordedInput, error) {
	steps := int(end.Sub(start)/step) + 1
	var inputs []recordedInput
	for _, q := range RecordedSeries {
		res, err := a.QueryRange(ctx, q, start, end, step)
		if err != nil {
			return nil, fmt.Errorf("record %s: %w", q, err)
		}
		for _, s := range res {
			inputs = append(inputs, recordedInput{Series: SeriesName(s.Metric), Values: strings.Join(stepValues(s, start, step, steps), " ")})
		}
	}
	sort.Slice(inputs, func(i, j int) bool { return inputs[i].Series < inputs[j].Series })
	return inputs, nil
}

// stepValues is a series at each step. A step without a sample after the
// series began is a gap the live Prometheus saw as stale (a failed scrape,
// a restart): "stale", not "_", which promtool would fill from the sample
// before for five minutes. The kubelet's last-seen gauge is a Unix time;
// promtool's clock starts at 0, so it is rebased on the recording's start
// (0, never relisted, stays 0).
func stepValues(s Series, start time.Time, step time.Duration, steps int) []string {
	vals := make([]string, steps)
	for i := range vals {
		vals[i] = "_"
	}
	first := steps
	for _, v := range s.Values {
		ts, _ := v[0].(float64)
		d := time.Unix(int64(ts), 0).Sub(start) + step/2
		i := int(d / step)
		if d < 0 || i >= steps {
			continue
		}
		vals[i], _ = v[1].(string)
		if s.Metric["__name__"] == "kubelet_pleg_last_seen_seconds" {
			if f, err := strconv.ParseFloat(vals[i], 64); err == nil && f > 0 {
				vals[i] = strconv.FormatFloat(f-float64(start.Unix()), 'f', -1, 64)
			}
		}
		first = min(first, i)
	}
	for i := first; i < steps; i++ {
		if vals[i] == "_" {
			vals[i] = "stale"
		}
	}
	return vals
}

// checkUntil is the end of check i's search: checkWindow after it, and
// before the next check and the end of the recording.
func checkUntil(checks []recordedCheck, i int, end time.Time) time.Time {
	until := checks[i].at.Add(checkWindow)
	if end.Before(until) {
		until = end
	}
	if i+1 < len(checks) && checks[i+1].at.Before(until) {
		until = checks[i+1].at
	}
	return until
}

// checkWindow bounds the search for a check's steady step: the 45 s a
// Hold keeps the state, and the steps around it.
const checkWindow = 90 * time.Second

// steady is the first evaluation step at or after a check, and before
// until, at which the live Prometheus had the same alerts firing one step
// before and one step after: away from a transition, where promtool's
// evaluation of the sampled series and the live one, at other instants,
// could disagree. ok is false when there is none.
func steady(ctx context.Context, a API, start time.Time, c recordedCheck, step time.Duration, until time.Time) (time.Time, []Sample, bool, error) {
	key := func(at time.Time) (string, []Sample, error) {
		res, err := a.QueryAt(ctx, RecordedAlerts, at)
		if err != nil {
			return "", nil, err
		}
		var ks []string
		for _, s := range res {
			ks = append(ks, fmt.Sprint(s.Metric, s.Value[1]))
		}
		sort.Strings(ks)
		return strings.Join(ks, ";"), res, nil
	}
	for at := start.Add((c.at.Sub(start) + step - 1).Truncate(step)); !at.Add(step).After(until); at = at.Add(step) {
		before, _, err := key(at.Add(-step))
		if err != nil {
			return time.Time{}, nil, false, err
		}
		now, res, err := key(at)
		if err != nil {
			return time.Time{}, nil, false, err
		}
		after, _, err := key(at.Add(step))
		if err != nil {
			return time.Time{}, nil, false, err
		}
		if before == now && now == after {
			return at, res, true, nil
		}
	}
	return time.Time{}, nil, false, nil
}

// SeriesName writes a series selector in promtool's input notation.
func SeriesName(m map[string]string) string {
	name := m["__name__"]
	var keys []string
	for k := range m {
		if k != "__name__" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%q", k, m[k]))
	}
	return name + "{" + strings.Join(parts, ", ") + "}"
}

// Recorded is a recording read back: what it names and what it asserts.
type Recorded struct {
	Name string
	// Kubelet is the git_version of the kubelet's kubernetes_build_info,
	// Runtime the version of the exporter's pleg_runtime_info, Gates the
	// kubelet's gates that were 1 at the end (CRIListStreaming,
	// EventedPLEG): read from the recorded series, not from the name.
	Kubelet, Runtime string
	Gates            []string
	// Checks are the checks' names (without their time) and the alerts
	// each asserts firing.
	Checks []RecordedCheck
}

// RecordedCheck is one check of a recording.
type RecordedCheck struct {
	Name   string
	Alerts []string
}

// ReadRecording reads a promtool test written by Recording.Write.
func ReadRecording(path string) (*Recorded, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f struct {
		Tests []struct {
			Name   string          `json:"name"`
			Inputs []recordedInput `json:"input_series"`
			Exprs  []recordedExpr  `json:"promql_expr_test"`
		} `json:"tests"`
	}
	// The comment lines first, then JSON (which is YAML).
	body := b
	for bytes.HasPrefix(body, []byte("#")) {
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			body = body[i+1:]
		} else {
			body = nil
		}
	}
	if err := json.Unmarshal(body, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(f.Tests) != 1 {
		return nil, fmt.Errorf("%s: %d tests, want the one a recording writes", path, len(f.Tests))
	}
	t := f.Tests[0]
	r := &Recorded{}
	name, checks, _ := strings.Cut(t.Name, ": ")
	r.Name = name
	names := strings.Split(checks, "; ")
	if len(names) != len(t.Exprs) {
		return nil, fmt.Errorf("%s: %d checks named, %d asserted", path, len(names), len(t.Exprs))
	}
	for i, e := range t.Exprs {
		c := RecordedCheck{Name: names[i]}
		if j := strings.LastIndex(c.Name, " at "); j >= 0 {
			c.Name = c.Name[:j]
		}
		for _, s := range e.Samples {
			c.Alerts = append(c.Alerts, s.Labels)
		}
		r.Checks = append(r.Checks, c)
	}
	for _, in := range t.Inputs {
		last := lastValue(in.Values)
		switch {
		case strings.HasPrefix(in.Series, "kubernetes_build_info{"):
			r.Kubelet = label(in.Series, "git_version")
		case strings.HasPrefix(in.Series, "pleg_runtime_info{"):
			r.Runtime = label(in.Series, "version")
		case strings.HasPrefix(in.Series, "kubernetes_feature_enabled{") && last == "1":
			r.Gates = append(r.Gates, label(in.Series, "name"))
		}
	}
	sort.Strings(r.Gates)
	if r.Kubelet == "" || r.Runtime == "" {
		return nil, fmt.Errorf("%s: no kubelet version (kubernetes_build_info) or runtime version (pleg_runtime_info) in its series", path)
	}
	return r, nil
}

// Cell names the kubelet, runtime and gates a recording is of: its file's
// name, e.g. v1.36.3_containerd-v1.7.35_EventedPLEG.
func (r *Recorded) Cell() string {
	gates := "default"
	if len(r.Gates) > 0 {
		gates = strings.Join(r.Gates, "+")
	}
	return r.Kubelet + "_containerd-" + strings.TrimPrefix(r.Runtime, "containerd-") + "_" + gates
}

// SameChecks says whether a live recording of a cell behaves as the
// committed one: the same checks in order; a check at which nothing fired
// is as quiet live; a check that paged pages live with one of the same
// critical alerts. Which other alerts have passed their for: at a check's
// instant depends on how many seconds the cluster took to reach it (two
// runs of one cell differ there: a stall alert's warning or critical, the
// kubelet's scrape that came or not), so those differences are Drift, not
// failures.
func SameChecks(committed, live *Recorded) error {
	var diffs []string
	if a, b := committed.Cell(), live.Cell(); a != b {
		diffs = append(diffs, fmt.Sprintf("recorded %s, live %s", a, b))
	}
	for i := 0; i < max(len(committed.Checks), len(live.Checks)); i++ {
		a, b := checkAt(committed, i), checkAt(live, i)
		switch {
		case a.Name != b.Name:
			diffs = append(diffs, fmt.Sprintf("check %d: recorded %q, live %q", i+1, a.Name, b.Name))
		case (len(a.Alerts) == 0) != (len(b.Alerts) == 0):
			diffs = append(diffs, fmt.Sprintf("check %d %q: recorded firing %v, live %v", i+1, a.Name, a.Alerts, b.Alerts))
		case len(critical(a.Alerts)) > 0 && !shareAny(critical(a.Alerts), b.Alerts):
			diffs = append(diffs, fmt.Sprintf("check %d %q: recorded paging with %v, live with none of them (firing %v)", i+1, a.Name, critical(a.Alerts), b.Alerts))
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("the live run does not match the recording: %s", strings.Join(diffs, "; "))
	}
	return nil
}

// Drift lists, per check, the alerts firing in only one of two recordings
// that SameChecks found alike.
func Drift(committed, live *Recorded) []string {
	var out []string
	for i := 0; i < min(len(committed.Checks), len(live.Checks)); i++ {
		a, b := committed.Checks[i], live.Checks[i]
		if only, also := minus(a.Alerts, b.Alerts), minus(b.Alerts, a.Alerts); len(only) > 0 || len(also) > 0 {
			out = append(out, fmt.Sprintf("check %d %q: recorded only %v, live only %v", i+1, a.Name, only, also))
		}
	}
	return out
}

func checkAt(r *Recorded, i int) RecordedCheck {
	if i < len(r.Checks) {
		return r.Checks[i]
	}
	return RecordedCheck{}
}

// critical are the alerts of severity critical among alerts (each
// {alertname="…", severity="…"}).
func critical(alerts []string) []string {
	var out []string
	for _, a := range alerts {
		if strings.Contains(a, `severity="critical"`) {
			out = append(out, a)
		}
	}
	return out
}

func shareAny(a, b []string) bool {
	return len(minus(a, b)) < len(a)
}

// minus is a without the elements of b.
func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// lastValue is the last sample of a promtool values string that is one.
func lastValue(values string) string {
	f := strings.Fields(values)
	for i := len(f) - 1; i >= 0; i-- {
		if f[i] != "_" && f[i] != "stale" {
			return f[i]
		}
	}
	return ""
}

// label reads one label's value from a series in promtool's notation.
func label(series, name string) string {
	i := strings.Index(series, "{"+name+`="`)
	if i < 0 {
		i = strings.Index(series, " "+name+`="`)
	}
	if i < 0 {
		return ""
	}
	v := series[i+len(name)+3:]
	if j := strings.IndexByte(v, '"'); j >= 0 {
		return v[:j]
	}
	return ""
}
