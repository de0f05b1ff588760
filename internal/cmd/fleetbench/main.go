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

// Command fleetbench measures what the exporter and its mixin cost one
// Prometheus at fleet scale, and the same fleet through Thanos, and writes
// docs/fleet.md (make bench-fleet). Every figure comes from one run of this
// program, on simulated nodes (internal/fleet) that serve the real
// collector's exposition:
//
//   - for each fleet size, three runs of Debian's Prometheus (15 s scrape
//     and evaluation): the kubelets alone without the mixin (the baseline),
//     the exporters beside them with the rendered mixin, and the same with
//     the opt-in per-namespace metrics; series per node, Prometheus' memory
//     against the baseline, each rule group's evaluation time, each
//     dashboard panel's query time at the dashboards' default range, and
//     whether the alerts fired on the faulty nodes and only on them;
//   - with -thanos, the largest fleet split over two clusters, each a
//     Prometheus with a Thanos sidecar, Thanos Query over both and Thanos
//     Ruler evaluating the mixin: the Ruler's rule groups, the panels through
//     the Query beside the same panels on one cluster's Prometheus directly.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pleg-exporter/pleg_exporter/internal/fleet"
	"github.com/pleg-exporter/pleg_exporter/internal/stack"
	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
	"github.com/pleg-exporter/pleg_exporter/mixin"
)

var (
	outFile     = flag.String("out", "docs/fleet.md", "report to write")
	nodesFlag   = flag.String("nodes", "1000,5000", "fleet sizes, comma-separated")
	warmup      = flag.Duration("run", 10*time.Minute, "how long each Prometheus scrapes before the measurements")
	faultAfter  = flag.Duration("fault-after", 2*time.Minute, "when the faulty nodes fail, after the start of the history")
	historyFlag = flag.Duration("history", 6*time.Hour, "history each Prometheus holds before it starts (the fleet lived on a virtual clock, written as TSDB blocks); 0: none")
	thanosBin   = flag.String("thanos", "", "Thanos binary; empty: no Thanos run")
	reps        = flag.Int("reps", 3, "runs of each panel query (the median is reported)")
	rangeFlag   = flag.Duration("range", 6*time.Hour, "the dashboards' time range (their default)")
	stepFlag    = flag.Duration("step", 20*time.Second, "range query step: Grafana's for the range on a panel ~1,100 pixels wide")
	interval    = 15 * time.Second
	dashboards  = []string{"pleg-fleet.json", "pleg-node.json"}
	repoFlag    = flag.String("repo", "", "the repository's root (its mixin and dashboards); empty: the nearest directory above with mixin/generated")
	resultsDir  = flag.String("results", "", "directory each run's result is saved in and reused from under the same parameters; empty: none")
	fresh       = flag.Bool("fresh", false, "measure every run again, even one saved in -results")
	savedOnly   = flag.Bool("saved-only", false, "write the report from the results saved in -results alone: a run not saved is named as missing, not measured")
	repoRoot    string
)

// findRepo is the nearest directory from here up that holds the rendered
// mixin.
func findRepo() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "mixin", "generated", "prometheus_rules.yaml")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no mixin/generated above the working directory: set -repo")
		}
		dir = parent
	}
}

func main() {
	flag.Parse()
	log.SetFlags(log.Ltime)
	repoRoot = *repoFlag
	if repoRoot == "" {
		var err error
		if repoRoot, err = findRepo(); err != nil {
			log.Fatal(err)
		}
	}
	sizes := parseSizes(*nodesFlag)
	warnShortRun()
	work, err := os.MkdirTemp("", "fleetbench")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(work)
	ctx := context.Background()
	recording := lazyRecording(ctx, work)
	p, err := currentParams()
	if err != nil {
		log.Fatal(err)
	}
	rep := &report{run: *warmup, rng: *rangeFlag, step: *stepFlag, history: *historyFlag}
	started := time.Now()
	for _, n := range sizes {
		for i, m := range []mode{baseline, withExporter, withNamespaces} {
			p := p
			if m == baseline {
				// It loads no rules and times no panel: a mixin change
				// leaves its result as it was.
				p.Mixin = ""
			}
			sv, err := measureOrReuse(fmt.Sprintf("%d-%s", n, m.slug()), p, func(sv *saved) (err error) {
				rec, err := recording()
				if err != nil {
					return err
				}
				sv.Single, err = single(ctx, filepath.Join(work, fmt.Sprintf("%d-%d", n, i)), rec, n, m)
				return err
			})
			if errors.Is(err, errNotSaved) {
				rep.missing = append(rep.missing, fmt.Sprintf("%d nodes, %s", n, m))
				continue
			}
			if err != nil {
				log.Fatalf("%d nodes, %s: %v", n, m, err)
			}
			rep.add(sv)
			rep.single = append(rep.single, sv.Single)
		}
	}
	if *thanosBin != "" {
		n := sizes[len(sizes)-1]
		sv, err := measureOrReuse(fmt.Sprintf("%d-thanos", n), p, func(sv *saved) (err error) {
			rec, err := recording()
			if err != nil {
				return err
			}
			sv.Thanos, err = thanos(ctx, filepath.Join(work, fmt.Sprintf("%d-thanos", n)), rec, n)
			return err
		})
		switch {
		case errors.Is(err, errNotSaved):
			rep.missing = append(rep.missing, fmt.Sprintf("%d nodes through Thanos", n))
		case err != nil:
			log.Fatalf("%d nodes through Thanos: %v", n, err)
		default:
			rep.add(sv)
			rep.thanos = sv.Thanos
		}
	}
	if err := os.WriteFile(*outFile, []byte(rep.markdown()), 0o644); err != nil {
		log.Fatal(err)
	}
	log.Printf("wrote %s in %v", *outFile, time.Since(started).Round(time.Second))
}

// warnShortRun: the runs without stored history start the fleet with
// Prometheus; their faults come at -fault-after and page minutes later.
func warnShortRun() {
	if *warmup < *faultAfter+3*time.Minute {
		log.Printf("-run %v ends before the faults of the runs without stored history (at -fault-after %v) can page: their alert verdicts will fail", *warmup, *faultAfter)
	}
}

// parseSizes reads -nodes.
func parseSizes(flagValue string) []int {
	var sizes []int
	for _, f := range strings.Split(flagValue, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 100 {
			log.Fatalf("-nodes: %q is not a fleet size of at least 100", f)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// lazyRecording sets the daemons' checks and the recorded relists up for
// the first run measured: where every result is reused, the report is
// written from them alone, in seconds, beside whatever else runs.
func lazyRecording(ctx context.Context, work string) func() (*fleet.Recording, error) {
	var rec *fleet.Recording
	return func() (*fleet.Recording, error) {
		if rec != nil {
			return rec, nil
		}
		if err := testenv.Check("prometheus", "prometheus-alertmanager"); err != nil {
			return nil, err
		}
		testenv.CleanLeftoversOrExit()
		r, err := fleet.Record(ctx, fleet.DefaultRecordConfig(work))
		rec = r
		return r, err
	}
}

type mode string

const (
	baseline       mode = "kubelets only, no mixin"
	withExporter   mode = "exporters and mixin"
	withNamespaces mode = "exporters with --collector.namespaces"
)

// slug names a run's saved result.
func (m mode) slug() string {
	switch m {
	case baseline:
		return "baseline"
	case withNamespaces:
		return "namespaces"
	}
	return "exporters"
}

// renderedDashboards are the committed dashboards (single cluster), or the
// mixin's rendered with showMultiCluster.
func renderedDashboards(multi bool) (map[string][]byte, error) {
	if multi {
		return mixin.RenderDashboards(filepath.Join(repoRoot, "mixin"), `{ showMultiCluster: true }`)
	}
	out := map[string][]byte{}
	for _, d := range dashboards {
		b, err := os.ReadFile(filepath.Join(repoRoot, "dashboards", d))
		if err != nil {
			return nil, err
		}
		out[d] = b
	}
	return out, nil
}

func ruleFiles() []string {
	return []string{filepath.Join(repoRoot, "mixin", "generated", "prometheus_rules.yaml"),
		filepath.Join(repoRoot, "mixin", "generated", "prometheus_alerts.yaml")}
}

// timePanels times every query of the dashboards against base.
func timePanels(ctx context.Context, base string, multi bool, vars map[string]string) ([]fleet.Timing, error) {
	files, err := renderedDashboards(multi)
	if err != nil {
		return nil, err
	}
	var out []fleet.Timing
	for _, d := range dashboards {
		panels, err := stack.Queries(d, files[d])
		if err != nil {
			return nil, err
		}
		for _, p := range panels {
			t := fleet.TimePanel(ctx, stack.API(base), p, vars, *rangeFlag, *stepFlag, *reps)
			if t.Err != nil {
				return nil, t.Err
			}
			out = append(out, t)
		}
	}
	return out, nil
}

// faultyNode is the node the node dashboard is timed on: an overflowing one.
func faultyNode(s *fleet.Sim, cluster string) string {
	for _, k := range s.Keys(fleet.Overflowing) {
		if c, n, _ := strings.Cut(k, "/"); c == cluster {
			return n
		}
	}
	return s.Nodes()[0].Name
}
