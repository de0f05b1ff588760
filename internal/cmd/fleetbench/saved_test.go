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
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/pleg-exporter/pleg_exporter/internal/fleet"
	"github.com/pleg-exporter/pleg_exporter/internal/stack"
)

// A saved result comes back whole and is reused under the same
// parameters; other parameters, a damaged file and -fresh measure again,
// and a failed run saves nothing.
func TestMeasureOrReuse(t *testing.T) {
	*resultsDir = t.TempDir()
	defer func() { *resultsDir, *fresh = "", false }()
	p := params{Run: 10 * time.Minute, History: 6 * time.Hour, Range: 6 * time.Hour, Step: 20 * time.Second, Reps: 3, Cores: 2, Mixin: "abc"}
	want := &singleResult{Nodes: 1000, Mode: withExporter, ExporterSeries: 112, Heap: 3 << 30,
		Groups:  []fleet.GroupStat{{Group: "pleg-exporter", Median: 0.02, Max: 0.05, MaxPct: 0.3, Samples: 40}},
		Panels:  []fleet.Timing{{Query: stack.Query{Dashboard: "pleg-fleet.json", Title: "Nodes by risk", Expr: "x", Instant: true}, Median: 12 * time.Millisecond, Series: 5}},
		Verdict: fleet.Verdict{Alerted: map[fleet.Life]int{fleet.Overflowing: 10}, Missing: map[fleet.Life][]string{fleet.Frozen: {"sim/n1"}}},
		Lives:   map[fleet.Life]int{fleet.Healthy: 900, fleet.Overflowing: 10}}
	runs := 0
	measure := func(sv *saved) error { runs++; sv.Single = want; return nil }

	first, err := measureOrReuse("1000-exporters", p, measure)
	if err != nil || runs != 1 {
		t.Fatalf("first: runs %d, err %v", runs, err)
	}
	again, err := measureOrReuse("1000-exporters", p, measure)
	if err != nil || runs != 1 {
		t.Fatalf("same parameters: runs %d, err %v, want the saved result", runs, err)
	}
	if !reflect.DeepEqual(again.Single, want) || !again.Measured.Equal(first.Measured) {
		t.Errorf("saved and read back:\n got %+v\nwant %+v", again.Single, want)
	}
	other := p
	other.Mixin = "def"
	if _, err := measureOrReuse("1000-exporters", other, measure); err != nil || runs != 2 {
		t.Errorf("other rules: runs %d, err %v, want measured again", runs, err)
	}
	*fresh = true
	if _, err := measureOrReuse("1000-exporters", other, measure); err != nil || runs != 3 {
		t.Errorf("-fresh: runs %d, err %v, want measured again", runs, err)
	}
	*fresh = false
	path := filepath.Join(*resultsDir, "1000-exporters.json")
	if err := os.WriteFile(path, []byte(`{"Params": `), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := measureOrReuse("1000-exporters", other, measure); err != nil || runs != 4 {
		t.Errorf("damaged file: runs %d, err %v, want measured again", runs, err)
	}
	failed := errors.New("prometheus died")
	if _, err := measureOrReuse("5000-exporters", p, func(*saved) error { return failed }); !errors.Is(err, failed) {
		t.Errorf("failed run: err %v", err)
	}
	if _, err := os.Stat(filepath.Join(*resultsDir, "5000-exporters.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("failed run saved a result: %v", err)
	}
	// -saved-only reuses what is saved and measures nothing.
	*savedOnly = true
	defer func() { *savedOnly = false }()
	if sv, err := measureOrReuse("1000-exporters", other, measure); err != nil || runs != 4 || !reflect.DeepEqual(sv.Single, want) {
		t.Errorf("-saved-only, saved: runs %d, err %v", runs, err)
	}
	if _, err := measureOrReuse("5000-exporters", p, measure); !errors.Is(err, errNotSaved) || runs != 4 {
		t.Errorf("-saved-only, not saved: runs %d, err %v, want errNotSaved and no run", runs, err)
	}
}

// The mixin's recording rules split into backfill levels: every record in
// exactly one level, each reading only the records of the levels before
// it, and a record reading another one comes after it.
func TestRuleLevels(t *testing.T) {
	repoRoot = filepath.Join("..", "..", "..")
	groups, err := readRuleGroups(ruleFiles()[0])
	if err != nil {
		t.Fatal(err)
	}
	records := 0
	for _, g := range groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				records++
			}
		}
	}
	levels := ruleLevels(groups)
	if len(levels) < 2 {
		t.Fatalf("%d levels: the mixin's records read other records, want at least 2", len(levels))
	}
	level := map[string]int{}
	for i, l := range levels {
		for _, g := range l {
			for _, r := range g.Rules {
				if _, dup := level[r.Record]; dup {
					t.Errorf("%s in two levels", r.Record)
				}
				level[r.Record] = i
			}
		}
	}
	if len(level) != records {
		t.Errorf("%d of %d records in a level", len(level), records)
	}
	for i, l := range levels {
		for _, g := range l {
			for _, r := range g.Rules {
				for rec := range recordsIn(r.Expr, groups) {
					if rec != r.Record && level[rec] >= i {
						t.Errorf("%s (level %d) reads %s (level %d)", r.Record, i, rec, level[rec])
					}
				}
			}
		}
	}
	if in := recordsIn("rate(a:b:c[5m]) + xa:b:c + a:b:cx", []ruleGroup{{Rules: []recordRule{{Record: "a:b:c"}}}}); len(in) != 1 || !in["a:b:c"] {
		t.Errorf("recordsIn: %v, want only the whole name a:b:c", in)
	}
	if in := recordsIn("xa:b:c + a:b:cx", []ruleGroup{{Rules: []recordRule{{Record: "a:b:c"}}}}); len(in) != 0 {
		t.Errorf("recordsIn: %v, want none (only longer names)", in)
	}
}
