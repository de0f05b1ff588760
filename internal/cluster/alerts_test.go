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
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sort"
	"sync"
	"testing"
	"time"
)

// pager is the webhook Alertmanager pages: when each alert first arrived
// firing, with its labels.
type pager struct {
	mu    sync.Mutex
	first map[string]page // by alertname
}

type page struct {
	at     time.Time
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
	p := &pager{first: map[string]page{}}
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
		name := a.Labels["alertname"]
		if _, seen := p.first[name]; !seen && a.Status == "firing" {
			p.first[name] = page{at: time.Now(), labels: a.Labels}
		}
	}
}

// firstPage is when the alert first arrived firing, if it did.
func (p *pager) firstPage(alertname string) (page, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pg, ok := p.first[alertname]
	return pg, ok
}

// series is one element of an instant query's vector.
type series struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// query runs an instant query against Prometheus.
func query(prom, q string) ([]series, error) {
	resp, err := http.Get(prom + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []series `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", q, body.Error)
	}
	return body.Data.Result, nil
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
		rs, err := query(m.PrometheusURL, `pleg_runtime_up`)
		rules, rerr := ruleNames(m.PrometheusURL)
		if err == nil && rerr == nil && len(rs) == 1 && rules["PLEGPayloadOverLimit"] {
			l := rs[0].Metric
			ks, _ := query(m.PrometheusURL, `kubelet_pleg_last_seen_seconds`)
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

// since lists every alert that paged at or after from, in the order they
// first arrived, as name@T0+seconds.
func (p *pager) since(from, t0 time.Time) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var pages []page
	for _, pg := range p.first {
		if !pg.at.Before(from) {
			pages = append(pages, pg)
		}
	}
	sort.Slice(pages, func(i, j int) bool { return pages[i].at.Before(pages[j].at) })
	out := make([]string, 0, len(pages))
	for _, pg := range pages {
		out = append(out, fmt.Sprintf("%s/%s@T0%+.1fs", pg.labels["alertname"], pg.labels["severity"], pg.at.Sub(t0).Seconds()))
	}
	return out
}
