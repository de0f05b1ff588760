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

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// pager is the webhook Alertmanager pages: every notification, firing or
// resolved, with when it arrived.
type pager struct {
	mu     sync.Mutex
	events []page
}

type page struct {
	at     time.Time
	status string // firing or resolved
	labels map[string]string
}

// startPager serves the webhook on the pod network's gateway, where the
// Alertmanager pod reaches the host.
func startPager(t *testing.T, c *Cluster) (*pager, string) {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(c.Kubelet.NodeIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	p := &pager{}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return p, "http://" + l.Addr().String() + "/"
}

func (p *pager) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Alerts []struct {
			Status string            `json:"status"`
			Labels map[string]string `json:"labels"`
		} `json:"alerts"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range body.Alerts {
		p.events = append(p.events, page{at: time.Now(), status: a.Status, labels: a.Labels})
	}
}

// firstPage is when an alert whose name starts with prefix first arrived
// firing at or after from, if one did.
func (p *pager) firstPage(prefix string, from time.Time) (page, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.events {
		if e.status == "firing" && !e.at.Before(from) && strings.HasPrefix(e.labels["alertname"], prefix) {
			return e, true
		}
	}
	return page{}, false
}

// firstExporterPage is the first PLEG alert at or after from that reads
// the exporter's series (every PLEGKubelet alert reads the kubelet's).
func (p *pager) firstExporterPage(from time.Time) (page, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.events {
		name := e.labels["alertname"]
		if e.status == "firing" && !e.at.Before(from) && strings.HasPrefix(name, "PLEG") && !strings.HasPrefix(name, "PLEGKubelet") {
			return e, true
		}
	}
	return page{}, false
}

// firsts is when each alert whose name starts with prefix first paged at or
// after from.
func (p *pager) firsts(prefix string, from time.Time) map[string]time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]time.Time{}
	for _, e := range p.events {
		name := e.labels["alertname"]
		if _, seen := out[name]; !seen && e.status == "firing" && !e.at.Before(from) && strings.HasPrefix(name, prefix) {
			out[name] = e.at
		}
	}
	return out
}

// alertKey names one alert: its name, severity and node.
func alertKey(l map[string]string) string {
	return l["alertname"] + "/" + l["severity"] + "{node=" + l["node"] + "}"
}

// unresolved lists the alerts that paged at or after from and whose last
// notification says firing.
func (p *pager) unresolved(from time.Time) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	last := map[string]string{}
	for _, e := range p.events {
		if !e.at.Before(from) {
			last[alertKey(e.labels)] = e.status
		}
	}
	var out []string
	for k, s := range last {
		if s == "firing" {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// ruleNames are the alerting and recording rules Prometheus loaded.
func ruleNames(prom string) (map[string]bool, error) {
	resp, err := http.Get(prom + "/api/v1/rules")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name string `json:"name"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, g := range body.Data.Groups {
		for _, r := range g.Rules {
			out[r.Name] = true
		}
	}
	return out, nil
}

// scraped waits until the operator's Prometheus, configured only by the
// chart's PodMonitor and PrometheusRule, scrapes the exporter's pod with
// the labels the alerts join on (node, namespace, pod) and has the
// mixin's alerts loaded.
func scraped(t *testing.T, m *Monitoring, pod string) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(2 * time.Second) {
		rs, err := m.API().Query(context.Background(), `pleg_runtime_up`)
		rules, rerr := ruleNames(m.PrometheusURL)
		if err == nil && rerr == nil && len(rs) == 1 && rules["PLEGPayloadOverLimit"] {
			l := rs[0].Metric
			ks, _ := m.API().Query(context.Background(), `kubelet_pleg_last_seen_seconds`)
			if l["node"] == Node && l["namespace"] == namespace && l["pod"] == pod && len(ks) == 1 {
				t.Logf("the operator's Prometheus scrapes the pod through the chart's PodMonitor: %v; %d rules loaded from the chart's PrometheusRule", l, len(rules))
				t.Logf("and the kubelet through the stack's ServiceMonitor: %v", ks[0].Metric)
				return
			}
			last = fmt.Sprintf("series %v; the kubelet's kubelet_pleg_last_seen_seconds: %d series", l, len(ks))
		} else {
			last = fmt.Sprintf("%d series (%v), PLEGPayloadOverLimit loaded %v (%v)", len(rs), err, rules["PLEGPayloadOverLimit"], rerr)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the operator's Prometheus did not scrape the exporter's pod %s within 3m: %s", pod, last)
		}
	}
}

// since lists every alert that first paged at or after from, in the order
// they arrived, as name/severity@T0+seconds.
func (p *pager) since(from, t0 time.Time) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, e := range p.events {
		if k := alertKey(e.labels); e.status == "firing" && !e.at.Before(from) && !seen[k] {
			seen[k] = true
			out = append(out, fmt.Sprintf("%s/%s@T0%+.1fs", e.labels["alertname"], e.labels["severity"], e.at.Sub(t0).Seconds()))
		}
	}
	return out
}

// kubeNodeNotReadyFor is the kubernetes-mixin's for: on KubeNodeNotReady.
const kubeNodeNotReadyFor = 15 * time.Minute

// anchor waits for the kubernetes-mixin's KubeNodeNotReady to go pending
// for the node and reports when it would page (its activeAt plus its 15m
// for:) against T1 and against the product's first page.
func anchor(t *testing.T, ctx context.Context, c *Cluster, tl timeline, first page) {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(time.Second) {
		as, err := c.monitoring.API().Alerts(ctx)
		for _, a := range as {
			if a.Labels["alertname"] == "KubeNodeNotReady" && a.Labels["node"] == Node {
				fires := a.ActiveAt.Add(kubeNodeNotReadyFor)
				t.Logf("KubeNodeNotReady (kubernetes-mixin, for: 15m) %s since %s: it pages at %s, %v after T1 and %v after the product's first page (%s)",
					a.State, tl.at(a.ActiveAt), tl.at(fires), fires.Sub(tl.t1()).Round(time.Second), fires.Sub(first.at).Round(time.Second), first.labels["alertname"])
				if a.ActiveAt.Before(tl.t1().Add(-time.Second)) {
					t.Errorf("KubeNodeNotReady active since %s, before the Node turned NotReady (T1 %s)", tl.at(a.ActiveAt), tl.at(tl.t1()))
				}
				return
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("KubeNodeNotReady not pending 90s after the Node turned NotReady (%d alerts, %v)", len(as), err)
			return
		}
	}
}
