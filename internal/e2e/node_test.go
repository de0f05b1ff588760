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

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/internal/stack"
	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
)

// grpcLimit is the kubelet's CRI receive limit (and containerd's send limit).
const grpcLimit = 16 << 20

func scrapeExporter(st *stack.Stack) (map[string]*dto.MetricFamily, error) {
	return testenv.ScrapeMetrics(st.Exporter.URL() + "/metrics")
}

// Agreement at rest: the exporter's counts and payload bytes are the
// runtime's own, and its counts are the kubelet's for every state the
// kubelet reports; its last-seen age is the kubelet's within one interval.
func agreement(t *testing.T, ctx context.Context, st *stack.Stack, rs runtimeapi.RuntimeServiceClient) {
	deadline := time.Now().Add(3 * time.Minute)
	var last []string
	for {
		var exp, kub map[string]*dto.MetricFamily
		v, err := testenv.StableView(ctx, rs, func() (err error) {
			if exp, err = scrapeExporter(st); err != nil {
				return err
			}
			kub, err = st.Kubelet.Metrics()
			return err
		})
		if err == nil {
			last = append(testenv.ExporterDiff(exp, v), testenv.KubeletDiff(kub, v)...)
			if len(last) == 0 {
				t.Logf("agreement at rest: %d containers %v, %d sandboxes %v: pleg_containers and kubelet_running_containers equal the runtime's answer; pleg_relist_payload_bytes %d (ListContainers) and %d (ListPodSandbox) equal its exact size",
					v.Total, v.Containers, int(v.Sandboxes["ready"]+v.Sandboxes["notready"]), v.Sandboxes, int(v.ContainerBytes), int(v.SandboxBytes))
				if v.Total < 500 || v.Containers["running"] < 3 {
					t.Errorf("only %d containers (%v running), want at least 500 with the static pods' running ones", v.Total, v.Containers["running"])
				}
				break
			}
		} else {
			last = []string{err.Error()}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no agreement within 3m:\n%s", strings.Join(last, "\n"))
		}
		time.Sleep(time.Second)
	}

	// Last-seen: the exporter's age against the kubelet's, read together.
	for i := 0; i < 3; i++ {
		exp, err := scrapeExporter(st)
		if err != nil {
			t.Fatal(err)
		}
		kub, err := st.Kubelet.Metrics()
		now := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		ours, _ := testenv.Gauge(exp, "pleg_last_seen_seconds", nil)
		seen, _ := testenv.Gauge(kub, "kubelet_pleg_last_seen_seconds", nil)
		theirs := float64(now.UnixNano())/1e9 - seen
		t.Logf("last seen: pleg_last_seen_seconds %.1f s, time() - kubelet_pleg_last_seen_seconds %.1f s", ours, theirs)
		// One interval, and 2 s for the relist and scrape themselves and the
		// kubelet's gauge, which holds whole seconds.
		if math.Abs(ours-theirs) > relistInterval.Seconds()+2 {
			t.Errorf("pleg_last_seen_seconds %.1f s and the kubelet's %.1f s differ by more than one relist interval (%s)", ours, theirs, relistInterval)
		}
		time.Sleep(3 * time.Second)
	}
}

// amAlert is an alert as Alertmanager's API shows it.
type amAlert struct {
	Labels map[string]string `json:"labels"`
	Status struct {
		State string `json:"state"`
	} `json:"status"`
}

func activeAlerts(ctx context.Context, st *stack.Stack) ([]string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, st.Alertmanager.URL()+"/api/v2/alerts?active=true", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var alerts []amAlert
	if err := json.NewDecoder(resp.Body).Decode(&alerts); err != nil {
		return nil, err
	}
	var out []string
	for _, a := range alerts {
		out = append(out, a.Labels["alertname"]+"/"+a.Labels["severity"])
	}
	// What Prometheus has pending or firing counts too: it reaches
	// Alertmanager at the next evaluation.
	res, err := st.Query(ctx, `ALERTS`)
	if err != nil {
		return nil, err
	}
	for _, s := range res {
		out = append(out, s.Metric["alertname"]+"/"+s.Metric["severity"]+" ("+s.Metric["alertstate"]+" in Prometheus)")
	}
	sort.Strings(out)
	return out, nil
}

// waitQuiet waits until no alert is active in Alertmanager or pending or
// firing in Prometheus.
func waitQuiet(ctx context.Context, st *stack.Stack, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		active, err := activeAlerts(ctx, st)
		if err == nil && len(active) == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("alerts still active after %s: %v (%v)", timeout, active, err)
		}
		time.Sleep(2 * time.Second)
	}
}

// firstAlert is the first firing PLEG alert at the webhook after since, and
// the first one that comes from the exporter (not the kubelet's metrics).
func firstAlerts(rec *receiver, since time.Time) (first, exporter event, ok bool) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, e := range rec.events {
		if e.at.Before(since) || e.status != "firing" || !strings.HasPrefix(e.labels["alertname"], "PLEG") {
			continue
		}
		if !ok {
			first, ok = e, true
		}
		if exporter.at.IsZero() && !strings.HasPrefix(e.labels["alertname"], "PLEGKubelet") {
			exporter = e
		}
	}
	return first, exporter, ok
}

func alertName(e event) string { return e.labels["alertname"] + "/" + e.labels["severity"] }
