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

package collector_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/pleg-exporter/pleg_exporter/collector"
	"github.com/pleg-exporter/pleg_exporter/internal/fakecri"
	"github.com/pleg-exporter/pleg_exporter/pleg"
	"github.com/pleg-exporter/pleg_exporter/runtime/cri"
)

func gauge(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			v := 0.0 // summed over every series
			for _, m := range mf.GetMetric() {
				if mf.GetType() == dto.MetricType_COUNTER {
					v += m.GetCounter().GetValue()
				} else {
					v += m.GetGauge().GetValue()
				}
			}
			return v
		}
	}
	t.Fatalf("%s not exported", name)
	return 0
}

func setup(t *testing.T, interval, timeout time.Duration) (*fakecri.Server, *pleg.Relister, *prometheus.Registry, context.CancelFunc) {
	t.Helper()
	srv, err := fakecri.Start(filepath.Join(t.TempDir(), "cri.sock"), fakecri.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	srv.SetPopulation(fakecri.Generate(fakecri.Spec{Ready: 5, Running: 5, Exited: 50}))
	c, err := cri.New(cri.Config{Endpoint: srv.Endpoint(), MaxRecvBytes: 256 << 20, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	metrics := collector.New(collector.Config{Threshold: 3 * time.Minute, LimitBytes: 16 << 20})
	r := pleg.NewRelister(c, pleg.Config{Interval: interval, LimitBytes: 16 << 20}, metrics, slog.New(slog.DiscardHandler))
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics)
	ctx, cancel := context.WithCancel(context.Background())
	go r.Run(ctx)
	t.Cleanup(cancel)
	select {
	case <-r.FirstRelistDone():
	case <-time.After(30 * time.Second):
		t.Fatal("first relist did not finish")
	}
	return srv, r, reg, cancel
}

// Scrapes read memory only: while the runtime hangs they stay fast and the
// age keeps growing, with the age of the hung list call.
func TestHungRuntimeScrapesStayFast(t *testing.T) {
	srv, _, reg, _ := setup(t, 50*time.Millisecond, 10*time.Second)
	srv.Block()
	time.Sleep(100 * time.Millisecond) // let a relist enter the hung call
	before := gauge(t, reg, "pleg_last_seen_seconds")
	listBefore := gauge(t, reg, "pleg_relist_list_in_flight_seconds")
	var worst time.Duration
	for i := 0; i < 20; i++ {
		t0 := time.Now()
		if _, err := reg.Gather(); err != nil {
			t.Fatal(err)
		}
		worst = max(worst, time.Since(t0))
		time.Sleep(50 * time.Millisecond)
	}
	after := gauge(t, reg, "pleg_last_seen_seconds")
	if after-before < 0.9 {
		t.Errorf("last seen grew %.2fs over ~1s of hang", after-before)
	}
	// The list call hangs since the relist began: its age is the age of
	// the last relist's start less the pause between them, and grows alike.
	if listAfter := gauge(t, reg, "pleg_relist_list_in_flight_seconds"); listBefore <= 0 || listAfter-listBefore < 0.9 || listAfter > after {
		t.Errorf("pleg_relist_list_in_flight_seconds %.2fs → %.2fs over ~1s of hang (last seen %.2fs): want it to grow with the hang, not past last seen", listBefore, listAfter, after)
	}
	if worst > 100*time.Millisecond {
		t.Errorf("slowest scrape during the hang took %s", worst)
	}
	t.Logf("scrape during hang: slowest %s; last seen %.2fs → %.2fs", worst, before, after)
	srv.Unblock()
	deadline := time.Now().Add(15 * time.Second)
	for gauge(t, reg, "pleg_last_seen_seconds") > 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := gauge(t, reg, "pleg_last_seen_seconds"); got > 1 {
		t.Errorf("no recovery after unblock: last seen %.2fs", got)
	}
	if got := gauge(t, reg, "pleg_relist_list_in_flight_seconds"); got > 1 {
		t.Errorf("after unblock: pleg_relist_list_in_flight_seconds %.2fs, want the list calls answered", got)
	}
}

func TestHangUntilDeadlineCountsError(t *testing.T) {
	srv, _, reg, _ := setup(t, 20*time.Millisecond, 200*time.Millisecond)
	srv.Block()
	deadline := time.Now().Add(10 * time.Second)
	for gauge(t, reg, "pleg_runtime_up") != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if gauge(t, reg, "pleg_runtime_up") != 0 {
		t.Fatal("runtime_up stayed 1 while hung")
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "pleg_relist_errors_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == "DeadlineExceeded" && m.GetCounter().GetValue() < 1 {
				t.Error("DeadlineExceeded not counted")
			}
		}
	}
	// Counts stay at the last exact answer.
	if c, s := gauge(t, reg, "pleg_containers"), gauge(t, reg, "pleg_sandboxes"); c != 55 || s != 5 {
		t.Errorf("counts during the hang: %v containers, %v sandboxes; want the last answer 55, 5", c, s)
	}
}

// Concurrent scrapes cause no runtime calls at all.
func TestConcurrentScrapesMakeNoCalls(t *testing.T) {
	srv, _, reg, cancel := setup(t, time.Hour, 10*time.Second)
	defer cancel()
	before := srv.TotalCalls()
	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := reg.Gather(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if d := srv.TotalCalls() - before; d != 0 {
		t.Errorf("100 scrapes made %d runtime calls", d)
	}
}
