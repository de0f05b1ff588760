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
	"log"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/pleg-exporter/pleg_exporter/internal/fleet"
	"github.com/pleg-exporter/pleg_exporter/internal/measure"
	"github.com/pleg-exporter/pleg_exporter/internal/stack"
)

// singleResult is one Prometheus run.
type singleResult struct {
	Nodes int
	Mode  mode
	// Series per answering exporter and kubelet, the exporter's own process
	// and Go series among them, recording rules' series, the head.
	ExporterSeries, SelfSeries, KubeletSeries, Recorded, Head float64
	// Heap is the mean go_memstats_heap_inuse_bytes over the run's last
	// third, RSS the largest process_resident_memory_bytes.
	Heap, RSS float64
	Groups    []fleet.GroupStat
	Panels    []fleet.Timing
	Verdict   fleet.Verdict
	Lives     map[fleet.Life]int
}

// serveFleet makes a simulated fleet, writes its history into the data
// directories (by cluster; none without -history), starts it on the wall
// clock and serves its targets.
func serveFleet(ctx context.Context, rec *fleet.Recording, n int, clusters []string, namespaces bool,
	dataDirs map[string]string, keep func(map[string]string) bool) (*fleet.Sim, net.Listener, time.Time, error) {
	var start time.Time
	history := *historyFlag > 0 && len(dataDirs) > 0
	if history {
		start = time.Now().Add(-*historyFlag)
	}
	s, err := fleet.New(fleet.Config{Clusters: clusters, Nodes: n, Seed: 1, FaultAfter: *faultAfter, Namespaces: namespaces, Start: start}, rec)
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	var end time.Time
	if history {
		if _, end, err = writeHistory(ctx, s, dataDirs, keep); err != nil {
			return nil, nil, end, err
		}
	}
	s.Start()
	l, err := s.Serve("127.0.0.1:0")
	if err != nil {
		s.Stop()
		return nil, nil, end, err
	}
	return s, l, end, nil
}

func all(map[string]string) bool { return true }

// writeTargets writes a cluster's targets, without the exporters' when
// kubeletsOnly.
func writeTargets(s *fleet.Sim, path, cluster, addr string, kubeletsOnly bool) error {
	if !kubeletsOnly {
		return s.WriteTargets(path, cluster, addr)
	}
	var keep []fleet.TargetGroup
	for _, g := range s.Targets(cluster, addr) {
		if g.Labels["job"] == "kubelet" {
			keep = append(keep, g)
		}
	}
	return fleet.WriteTargetGroups(path, keep)
}

func single(ctx context.Context, dir string, rec *fleet.Recording, n int, m mode) (*singleResult, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	// Only the run that times the rules and panels stores the history:
	// the others measure series and memory, which the head holds.
	promDir := filepath.Join(dir, "prom")
	var dataDirs map[string]string
	if m == withExporter {
		dataDirs = map[string]string{"sim": filepath.Join(promDir, "data")}
	}
	s, l, end, err := serveFleet(ctx, rec, n, nil, m == withNamespaces, dataDirs, all)
	if err != nil {
		return nil, err
	}
	defer s.Stop()
	defer l.Close()
	targets := filepath.Join(dir, "targets.json")
	if err := writeTargets(s, targets, "sim", l.Addr().String(), m == baseline); err != nil {
		return nil, err
	}
	am, err := fleet.StartAlertmanager(filepath.Join(dir, "am"))
	if err != nil {
		return nil, err
	}
	defer am.Stop()
	opts := fleet.PrometheusOptions{Dir: promDir, Cluster: "sim", TargetsFile: targets, Alertmanagers: []string{am.Addr}}
	if m != baseline {
		opts.RuleFiles = ruleFiles()
	}
	prom, err := fleet.StartPrometheus(opts)
	if err != nil {
		return nil, err
	}
	defer prom.Stop()
	if dataDirs != nil {
		if err := backfillRules(ctx, prom, filepath.Join(promDir, "data"), s.Started(), end); err != nil {
			return nil, err
		}
	}
	log.Printf("%d nodes, %s: Prometheus scraping for %v", n, m, *warmup)
	wctx, cancel := context.WithTimeout(ctx, *warmup)
	samples := fleet.Watch(wctx, prom, interval)
	cancel()
	r := &singleResult{Nodes: n, Mode: m, Lives: s.ByLife()}
	if err := r.series(ctx, prom.API()); err != nil {
		return nil, err
	}
	r.Heap, r.RSS = memory(samples)
	if len(samples) > 0 {
		r.Head = samples[len(samples)-1].HeadSeries
	}
	if m == baseline {
		return r, nil
	}
	r.Groups = fleet.RuleGroups(after(samples, settle(dataDirs != nil)), interval)
	vars := map[string]string{"node": faultyNode(s, "sim"), "cluster": "sim"}
	if r.Panels, err = timePanels(ctx, prom.URL(), false, vars); err != nil {
		return nil, err
	}
	alerts, err := fleet.Alerts(ctx, am)
	if err != nil {
		return nil, err
	}
	r.Verdict = s.Judge(alerts)
	log.Printf("%d nodes, %s: heap %.0f MiB, %d rule groups, %d panels; alerts: %v", n, m, r.Heap/(1<<20), len(r.Groups), len(r.Panels), r.Verdict.Alerted)
	return r, nil
}

// series counts the series Prometheus holds per answering target.
func (r *singleResult) series(ctx context.Context, api stack.API) error {
	count := func(q string) (float64, error) {
		res, err := api.Query(ctx, "count("+q+")")
		if err != nil || len(res) == 0 {
			return 0, err
		}
		v, _ := res[0].Value[1].(string)
		return strconv.ParseFloat(v, 64)
	}
	var err error
	up := map[string]float64{}
	for _, job := range []string{"pleg-exporter", "kubelet"} {
		if up[job], err = count(fmt.Sprintf(`up{job=%q} == 1`, job)); err != nil {
			return err
		}
	}
	per := func(q, job string) float64 {
		v, e := count(q)
		if e != nil {
			err = e
		}
		if up[job] == 0 {
			return 0
		}
		return v / up[job]
	}
	r.ExporterSeries = per(`{job="pleg-exporter"}`, "pleg-exporter")
	r.SelfSeries = per(`{job="pleg-exporter", __name__=~"go_.*|process_.*|promhttp_.*"}`, "pleg-exporter")
	r.KubeletSeries = per(`{job="kubelet"}`, "kubelet")
	r.Recorded = per(`{__name__=~".+:.+"}`, "pleg-exporter")
	return err
}

// memory is the mean heap in use over the run's last third and the largest
// resident set.
func memory(samples []fleet.Sample) (heap, rss float64) {
	var hs []float64
	for i, s := range samples {
		if i >= len(samples)*2/3 {
			hs = append(hs, s.HeapInuse)
		}
		rss = max(rss, s.RSS)
	}
	sum := 0.0
	for _, h := range hs {
		sum += h
	}
	if len(hs) > 0 {
		heap = sum / float64(len(hs))
	}
	return heap, rss
}

// settle is how much of a run's start the rule groups' figures leave out:
// until the faults begin, or with a stored history (the faults long past)
// the first minute; at most half the run.
func settle(history bool) time.Duration {
	d := *faultAfter
	if history {
		d = time.Minute
	}
	return min(d, *warmup/2)
}

// after drops the samples of the run's first d.
func after(samples []fleet.Sample, d time.Duration) []fleet.Sample {
	if len(samples) == 0 {
		return nil
	}
	start := samples[0].At
	var out []fleet.Sample
	for _, s := range samples {
		if s.At.Sub(start) >= d {
			out = append(out, s)
		}
	}
	return out
}

// thanosResult is the fleet over two clusters through Thanos.
type thanosResult struct {
	Nodes           int
	Ruler           []fleet.GroupStat
	Direct, Through []fleet.Timing
	Verdict         fleet.Verdict
	Heaps           []float64
	Lives           map[fleet.Life]int
}

func thanos(ctx context.Context, dir string, rec *fleet.Recording, n int) (*thanosResult, error) {
	clusters := []string{"east", "west"}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	dataDirs := map[string]string{}
	for _, c := range clusters {
		dataDirs[c] = filepath.Join(dir, "prom-"+c, "data")
	}
	s, l, end, err := serveFleet(ctx, rec, n, clusters, false, dataDirs, all)
	if err != nil {
		return nil, err
	}
	defer s.Stop()
	defer l.Close()
	am, err := fleet.StartAlertmanager(filepath.Join(dir, "am"))
	if err != nil {
		return nil, err
	}
	defer am.Stop()
	var proms []*fleet.Server
	var endpoints []string
	for _, c := range clusters {
		targets := filepath.Join(dir, c+"-targets.json")
		if err := s.WriteTargets(targets, c, l.Addr().String()); err != nil {
			return nil, err
		}
		pdir := filepath.Join(dir, "prom-"+c)
		// Each Prometheus records and alerts for its cluster, as
		// kube-thanos' do; the Ruler evaluates the same rules over both.
		prom, err := fleet.StartPrometheus(fleet.PrometheusOptions{Dir: pdir, Cluster: c, TargetsFile: targets, Sidecar: true,
			RuleFiles: ruleFiles(), Alertmanagers: []string{am.Addr}})
		if err != nil {
			return nil, err
		}
		defer prom.Stop()
		if *historyFlag > 0 {
			if err := backfillRules(ctx, prom, dataDirs[c], s.Started(), end); err != nil {
				return nil, err
			}
		}
		side, err := fleet.StartSidecar(*thanosBin, filepath.Join(dir, "sidecar-"+c), prom, filepath.Join(pdir, "data"), filepath.Join(pdir, "prometheus.yml"))
		if err != nil {
			return nil, err
		}
		defer side.Stop()
		proms = append(proms, prom)
		endpoints = append(endpoints, side.GRPC)
	}
	rulerGRPC, err := measure.FreeAddr()
	if err != nil {
		return nil, err
	}
	query, err := fleet.StartQuery(*thanosBin, filepath.Join(dir, "query"), append(endpoints, rulerGRPC)...)
	if err != nil {
		return nil, err
	}
	defer query.Stop()
	ruler, err := fleet.StartRuler(*thanosBin, filepath.Join(dir, "ruler"), rulerGRPC, query.Addr, am.Addr, interval, ruleFiles()...)
	if err != nil {
		return nil, err
	}
	defer ruler.Stop()
	log.Printf("%d nodes over %v through Thanos: scraping for %v", n, clusters, *warmup)
	return thanosMeasure(ctx, s, n, proms, query, ruler, am)
}

func thanosMeasure(ctx context.Context, s *fleet.Sim, n int, proms []*fleet.Server, query *fleet.ThanosServer,
	ruler *fleet.ThanosServer, am *fleet.Server) (*thanosResult, error) {
	wctx, cancel := context.WithTimeout(ctx, *warmup)
	defer cancel()
	var wg sync.WaitGroup
	promSamples := make([][]fleet.Sample, len(proms))
	for i, p := range proms {
		wg.Add(1)
		go func() { defer wg.Done(); promSamples[i] = fleet.Watch(wctx, p, interval) }()
	}
	rulerSamples := fleet.Watch(wctx, ruler.Server, interval)
	wg.Wait()
	r := &thanosResult{Nodes: n, Ruler: fleet.RuleGroups(after(rulerSamples, settle(*historyFlag > 0)), interval), Lives: s.ByLife()}
	for _, smp := range promSamples {
		h, _ := memory(smp)
		r.Heaps = append(r.Heaps, h)
	}
	vars := map[string]string{"node": faultyNode(s, "east"), "cluster": "east"}
	var err error
	if r.Direct, err = timePanels(ctx, proms[0].URL(), false, vars); err != nil {
		return nil, err
	}
	if r.Through, err = timePanels(ctx, query.URL(), true, vars); err != nil {
		return nil, err
	}
	alerts, err := fleet.Alerts(ctx, am)
	if err != nil {
		return nil, err
	}
	r.Verdict = s.Judge(alerts)
	return r, nil
}
