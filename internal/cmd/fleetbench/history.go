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

package main

import (
	"context"
	"fmt"
	"hash/maphash"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
	"sigs.k8s.io/yaml"

	"github.com/pleg-exporter/pleg_exporter/internal/fleet"
)

// blockRange is the TSDB's block range: one block per two hours.
const blockRange = 2 * time.Hour

// blocks writes a fleet's history as TSDB blocks, one per two-hour window,
// into a Prometheus data directory, as a Prometheus that had scraped it
// would hold them.
type blocks struct {
	dir     string
	w       *tsdb.BlockWriter
	app     storage.Appender
	window  time.Time
	refs    map[uint64]storage.SeriesRef
	seed    maphash.Seed
	samples int64
	pending int
}

func newBlocks(dir string) *blocks { return &blocks{dir: dir, seed: maphash.MakeSeed()} }

// emit is a fleet.Emit: one scrape of one target at t.
func (b *blocks) emit(t time.Time, _ string, target map[string]string, mfs []*dto.MetricFamily) error {
	if err := b.roll(t); err != nil {
		return err
	}
	ms := t.UnixMilli()
	up := 1.0
	if mfs == nil {
		up = 0
	}
	if err := b.add(target, "up", nil, ms, up); err != nil {
		return err
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if err := b.addMetric(target, mf.GetName(), m, ms); err != nil {
				return err
			}
		}
	}
	if b.pending > 200000 {
		b.pending = 0
		if err := b.app.Commit(); err != nil {
			return err
		}
		b.app = b.w.Appender(context.Background())
	}
	return nil
}

func (b *blocks) addMetric(target map[string]string, name string, m *dto.Metric, ms int64) error {
	switch {
	case m.Histogram != nil:
		h := m.GetHistogram()
		for _, bk := range h.GetBucket() {
			le := strconv.FormatFloat(bk.GetUpperBound(), 'f', -1, 64)
			if err := b.add(target, name+"_bucket", append(m.GetLabel(), pair("le", le)), ms, float64(bk.GetCumulativeCount())); err != nil {
				return err
			}
		}
		if err := b.add(target, name+"_bucket", append(m.GetLabel(), pair("le", "+Inf")), ms, float64(h.GetSampleCount())); err != nil {
			return err
		}
		if err := b.add(target, name+"_sum", m.GetLabel(), ms, h.GetSampleSum()); err != nil {
			return err
		}
		return b.add(target, name+"_count", m.GetLabel(), ms, float64(h.GetSampleCount()))
	case m.Gauge != nil:
		return b.add(target, name, m.GetLabel(), ms, m.GetGauge().GetValue())
	case m.Counter != nil:
		return b.add(target, name, m.GetLabel(), ms, m.GetCounter().GetValue())
	case m.Untyped != nil:
		return b.add(target, name, m.GetLabel(), ms, m.GetUntyped().GetValue())
	}
	return fmt.Errorf("fleetbench: %s: a metric type the history does not write", name)
}

func pair(name, value string) *dto.LabelPair { return &dto.LabelPair{Name: &name, Value: &value} }

// add appends one sample of the series of target's labels, the metric's
// and its name. A series seen before in this window is found by a hash of
// its labels, without building them.
func (b *blocks) add(target map[string]string, name string, lps []*dto.LabelPair, ms int64, v float64) error {
	var h maphash.Hash
	h.SetSeed(b.seed)
	h.WriteString(target["job"])
	h.WriteByte(0)
	h.WriteString(target["instance"])
	h.WriteByte(0)
	h.WriteString(name)
	for _, lp := range lps {
		h.WriteByte(0)
		h.WriteString(lp.GetName())
		h.WriteByte(0)
		h.WriteString(lp.GetValue())
	}
	key := h.Sum64()
	if ref, ok := b.refs[key]; ok {
		if _, err := b.app.Append(ref, labels.EmptyLabels(), ms, v); err != nil {
			return fmt.Errorf("fleetbench: history %s at %d: %w", name, ms, err)
		}
	} else {
		kv := make([]string, 0, 2*(len(target)+len(lps)+1))
		kv = append(kv, labels.MetricName, name)
		for _, lp := range lps {
			kv = append(kv, lp.GetName(), lp.GetValue())
		}
		// honor_labels: a label of the metric's wins over the target's.
	target:
		for k, v := range target {
			for _, lp := range lps {
				if lp.GetName() == k {
					continue target
				}
			}
			kv = append(kv, k, v)
		}
		ls := labels.FromStrings(kv...)
		ref, err := b.app.Append(0, ls, ms, v)
		if err != nil {
			return fmt.Errorf("fleetbench: history %s at %d: %w", ls, ms, err)
		}
		b.refs[key] = ref
	}
	b.samples++
	b.pending++
	return nil
}

// roll starts a new block writer when t enters the next two-hour window.
func (b *blocks) roll(t time.Time) error {
	window := t.Truncate(blockRange)
	if b.w != nil && window.Equal(b.window) {
		return nil
	}
	if err := b.flush(); err != nil {
		return err
	}
	w, err := tsdb.NewBlockWriter(slog.New(slog.DiscardHandler), b.dir, blockRange.Milliseconds())
	if err != nil {
		return err
	}
	b.w, b.window, b.refs, b.pending = w, window, map[uint64]storage.SeriesRef{}, 0
	b.app = w.Appender(context.Background())
	return nil
}

// flush writes the window's block.
func (b *blocks) flush() error {
	if b.w == nil {
		return nil
	}
	defer func() { b.w.Close(); b.w = nil }()
	if err := b.app.Commit(); err != nil {
		return err
	}
	if _, err := b.w.Flush(context.Background()); err != nil {
		return err
	}
	// A 5,000-node history takes long enough that silence looks like a hang.
	log.Printf("history: block %v to %v written in %s, %d samples so far", b.window.Format(time.TimeOnly),
		b.window.Add(blockRange).Format(time.TimeOnly), b.dir, b.samples)
	return nil
}

// writeHistory lives the fleet from its start up to the wall clock into
// blocks, a data directory per cluster (dataDirs), only the targets keep
// says, and returns the samples written and the last step's time.
func writeHistory(ctx context.Context, s *fleet.Sim, dataDirs map[string]string, keep func(target map[string]string) bool) (int64, time.Time, error) {
	bs := map[string]*blocks{}
	for c, d := range dataDirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return 0, time.Time{}, err
		}
		bs[c] = newBlocks(d)
	}
	started := time.Now()
	end, err := s.CatchUp(ctx, interval, func(t time.Time, cluster string, target map[string]string, mfs []*dto.MetricFamily) error {
		b := bs[cluster]
		if b == nil || !keep(target) {
			return nil
		}
		return b.emit(t, cluster, target, mfs)
	})
	var samples int64
	for _, b := range bs {
		if err == nil {
			err = b.flush()
		}
		samples += b.samples
	}
	log.Printf("history: %d samples from %v to %v in %v", samples, s.Started().Format(time.TimeOnly), end.Format(time.TimeOnly), time.Since(started).Round(time.Second))
	return samples, end, err
}

// ruleLevels splits the recording rules into levels: each reads only the
// raw series and the records of the levels before it, as promtool's
// backfill needs (it cannot read a record it is writing).
func ruleLevels(groups []ruleGroup) [][]ruleGroup {
	level := map[string]int{}
	var levels [][]ruleGroup
	for pass := 0; pass < 10; pass++ {
		var this []ruleGroup
		for _, g := range groups {
			var rules []recordRule
			for _, r := range g.Rules {
				if _, done := level[r.Record]; done || r.Record == "" {
					continue
				}
				ready := true
				for rec := range recordsIn(r.Expr, groups) {
					if l, ok := level[rec]; rec != r.Record && (!ok || l >= pass) {
						ready = false
					}
				}
				if ready {
					rules = append(rules, r)
				}
			}
			if len(rules) > 0 {
				this = append(this, ruleGroup{Name: g.Name, Rules: rules})
			}
		}
		if len(this) == 0 {
			break
		}
		for _, g := range this {
			for _, r := range g.Rules {
				level[r.Record] = pass
			}
		}
		levels = append(levels, this)
	}
	return levels
}

type recordRule struct {
	Record string            `json:"record"`
	Expr   string            `json:"expr"`
	Labels map[string]string `json:"labels,omitempty"`
}

type ruleGroup struct {
	Name  string       `json:"name"`
	Rules []recordRule `json:"rules"`
}

// recordsIn are the recording rules' names an expression reads: each
// name where neither side continues it.
func recordsIn(expr string, groups []ruleGroup) map[string]bool {
	out := map[string]bool{}
	name := func(c byte) bool {
		return c == '_' || c == ':' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	for _, g := range groups {
		for _, r := range g.Rules {
			for i := 0; r.Record != "" && i < len(expr); {
				j := strings.Index(expr[i:], r.Record)
				if j < 0 {
					break
				}
				start, end := i+j, i+j+len(r.Record)
				if (start == 0 || !name(expr[start-1])) && (end == len(expr) || !name(expr[end])) {
					out[r.Record] = true
				}
				i = end
			}
		}
	}
	return out
}

func readRuleGroups(path string) ([]ruleGroup, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f struct {
		Groups []ruleGroup `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f.Groups, nil
}

func writeRuleGroups(path string, groups []ruleGroup) error {
	b, err := yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// backfillRules writes the recording rules' records over [from, to] with
// promtool, level by level, into dataDir, waiting for Prometheus to load
// each level's blocks before the next level reads them.
func backfillRules(ctx context.Context, prom *fleet.Server, dataDir string, from, to time.Time) error {
	groups, err := readRuleGroups(ruleFiles()[0])
	if err != nil {
		return err
	}
	for i, level := range ruleLevels(groups) {
		file := filepath.Join(filepath.Dir(dataDir), fmt.Sprintf("records-%d.yaml", i))
		if err := writeRuleGroups(file, level); err != nil {
			return err
		}
		out := filepath.Join(filepath.Dir(dataDir), fmt.Sprintf("records-%d", i))
		cmd := exec.CommandContext(ctx, "promtool", "tsdb", "create-blocks-from", "rules", "--quiet",
			"--url="+prom.URL(), "--start="+strconv.FormatInt(from.Unix(), 10), "--end="+strconv.FormatInt(to.Unix(), 10),
			"--eval-interval="+interval.String(), "--output-dir="+out, file)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("promtool create-blocks-from rules (level %d): %v: %s", i, err, b)
		}
		n, err := moveBlocks(out, dataDir)
		if err != nil {
			return err
		}
		if err := waitLoaded(ctx, prom, level, from, to); err != nil {
			return fmt.Errorf("level %d (%d blocks): %w", i, n, err)
		}
	}
	return nil
}

// moveBlocks moves promtool's blocks into the data directory.
func moveBlocks(from, to string) (int, error) {
	entries, err := os.ReadDir(from)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		if e.IsDir() && len(e.Name()) == 26 {
			if err := os.Rename(filepath.Join(from, e.Name()), filepath.Join(to, e.Name())); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// waitLoaded waits until Prometheus answers a level's first record inside
// the backfilled [from, to] (it loads new blocks once a minute): half an
// hour in, or halfway through a shorter history.
func waitLoaded(ctx context.Context, prom *fleet.Server, level []ruleGroup, from, to time.Time) error {
	rec := level[0].Rules[0].Record
	at := from.Add(min(30*time.Minute, to.Sub(from)/2))
	deadline := time.Now().Add(4 * time.Minute)
	for time.Now().Before(deadline) {
		res, err := prom.API().QueryAt(ctx, "count("+rec+")", at)
		if err == nil && len(res) > 0 {
			return nil
		}
		time.Sleep(5 * time.Second)
	}
	return fmt.Errorf("Prometheus has no %s at %v after 4m: the blocks did not load", rec, at)
}
