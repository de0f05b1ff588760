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
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/pleg-exporter/pleg_exporter/internal/measure"
	"github.com/pleg-exporter/pleg_exporter/internal/stack"
	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
)

// Server is a monitoring process on loopback: Prometheus, Alertmanager or
// a Thanos component.
type Server struct {
	*testenv.Daemon
	Addr string // its HTTP address
}

// URL is the server's base URL.
func (s *Server) URL() string { return "http://" + s.Addr }

// API is the server's Prometheus query API (Prometheus, Thanos Query).
func (s *Server) API() stack.API { return stack.API(s.URL()) }

// start starts a daemon whose HTTP address is an argument, and waits until
// ready answers 200.
func start(kind, dir, bin string, args func(addr string) []string, ready string) (*Server, error) {
	addr, err := measure.FreeAddr()
	if err != nil {
		return nil, err
	}
	a := args(addr)
	marker := ""
	for _, x := range a {
		if strings.Contains(x, dir) {
			marker = x
			break
		}
	}
	d, err := testenv.StartDaemon(kind, dir, bin, marker, a...)
	if err != nil {
		return nil, err
	}
	s := &Server{Daemon: d, Addr: addr}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if d.Exited() {
			return nil, fmt.Errorf("%s exited during start-up: %s", kind, d.LastLines(15))
		}
		if resp, err := http.Get(s.URL() + ready); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			d.Stop()
			return nil, fmt.Errorf("%s not ready on %s after 2m: %s", kind, addr, d.LastLines(15))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// PrometheusOptions configure one Prometheus of the fleet.
type PrometheusOptions struct {
	Dir string
	// Bin is the prometheus binary (Debian's "prometheus" when empty).
	Bin string
	// Cluster is the external label cluster; TargetsFile its file_sd file.
	Cluster, TargetsFile string
	// Interval is the scrape and evaluation interval (15s when zero).
	Interval time.Duration
	// RuleFiles are loaded (the rendered mixin); none with Thanos Ruler.
	RuleFiles []string
	// Alertmanagers are host:port addresses to send alerts to.
	Alertmanagers []string
	// Sidecar sets the 2h blocks a Thanos sidecar needs.
	Sidecar bool
}

// StartPrometheus writes the configuration and starts Prometheus.
func StartPrometheus(o PrometheusOptions) (*Server, error) {
	if o.Bin == "" {
		o.Bin = "prometheus"
	}
	if o.Interval == 0 {
		o.Interval = 15 * time.Second
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  evaluation_interval: %s\n  scrape_timeout: 10s\n", o.Interval, o.Interval)
	fmt.Fprintf(&b, "  external_labels:\n    cluster: %q\n", o.Cluster)
	if len(o.RuleFiles) > 0 {
		b.WriteString("rule_files:\n")
		for _, f := range o.RuleFiles {
			fmt.Fprintf(&b, "  - %q\n", f)
		}
	}
	if len(o.Alertmanagers) > 0 {
		fmt.Fprintf(&b, "alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: %s\n", jsonList(o.Alertmanagers))
	}
	// The job label comes from each target (pleg-exporter, kubelet). The
	// targets' own labels win, as the chart's PodMonitor (honorLabels) and
	// kube-prometheus-stack's kubelet ServiceMonitor have it.
	fmt.Fprintf(&b, "scrape_configs:\n  - job_name: fleet\n    honor_labels: true\n    file_sd_configs:\n      - files: [%q]\n        refresh_interval: 30s\n", o.TargetsFile)
	cfg := filepath.Join(o.Dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o644); err != nil {
		return nil, err
	}
	data := filepath.Join(o.Dir, "data")
	return start("prometheus-"+o.Cluster, o.Dir, o.Bin, func(addr string) []string {
		// The backfill's range queries over hours of a 5,000-node fleet
		// passed the default 2m query timeout (a 503 to promtool at
		// level 1); the panels' queries take well under a second.
		args := []string{"--config.file=" + cfg, "--storage.tsdb.path=" + data, "--web.listen-address=" + addr,
			"--storage.tsdb.retention.time=1d", "--log.level=warn", "--query.timeout=30m"}
		if o.Sidecar {
			// The sidecar's reloader reloads Prometheus through the
			// lifecycle API, as kube-prometheus' does.
			args = append(args, "--storage.tsdb.min-block-duration=2h", "--storage.tsdb.max-block-duration=2h", "--web.enable-lifecycle")
		}
		return args
	}, "/-/ready")
}

func jsonList(l []string) string {
	b, _ := json.Marshal(l)
	return string(b)
}

// StartAlertmanager starts Debian's Alertmanager with one receiver and no
// integration: the test reads the alerts it received from its API. extra is
// more of its configuration (inhibit_rules).
func StartAlertmanager(dir string, extra ...string) (*Server, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "alertmanager.yml")
	conf := "route:\n  receiver: default\n  group_by: [cluster, alertname, node]\n  group_wait: 5s\n  group_interval: 15s\nreceivers:\n  - name: default\n"
	conf += strings.Join(extra, "\n")
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	return start("alertmanager", dir, "prometheus-alertmanager", func(addr string) []string {
		return []string{"--config.file=" + cfg, "--storage.path=" + filepath.Join(dir, "data"),
			"--web.listen-address=" + addr, "--cluster.listen-address="}
	}, "/-/ready")
}

// Alert is one alert Alertmanager holds.
type Alert struct {
	Labels map[string]string `json:"labels"`
	Status struct {
		State       string   `json:"state"`
		InhibitedBy []string `json:"inhibitedBy"`
	} `json:"status"`
}

// PostAlerts sends alerts to Alertmanager as Prometheus does (labels only,
// firing from now for an hour).
func PostAlerts(ctx context.Context, am *Server, labels ...map[string]string) error {
	type alert struct {
		Labels   map[string]string `json:"labels"`
		StartsAt time.Time         `json:"startsAt"`
		EndsAt   time.Time         `json:"endsAt"`
	}
	var body []alert
	for _, l := range labels {
		body = append(body, alert{Labels: l, StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour)})
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, am.URL()+"/api/v2/alerts", bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("alertmanager: POST alerts: %s", resp.Status)
	}
	return nil
}

// Alerts returns the alerts Alertmanager holds now.
func Alerts(ctx context.Context, am *Server) ([]Alert, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, am.URL()+"/api/v2/alerts", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("alertmanager: %s", resp.Status)
	}
	var out []Alert
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// Verdict compares the alerts with the nodes' lives: every node whose life
// must page has its alert, no node has an alert its life does not allow.
type Verdict struct {
	// Missing are nodes without the alert their life needs, by life.
	Missing map[Life][]string
	// Unexpected are alerts on nodes whose life does not allow them, as
	// "cluster/node alertname".
	Unexpected []string
	// Alerted counts the nodes with at least one alert, by life.
	Alerted map[Life]int
}

// OK says whether the fleet alerted exactly as its lives want.
func (v Verdict) OK() bool { return len(v.Missing) == 0 && len(v.Unexpected) == 0 }

func (v Verdict) String() string {
	var b strings.Builder
	for _, l := range Lives {
		if m := v.Missing[l]; len(m) > 0 {
			fmt.Fprintf(&b, "%d %s nodes without %s: %s; ", len(m), l, strings.Join(required[l], " or "), strings.Join(first(m, 5), ", "))
		}
	}
	if len(v.Unexpected) > 0 {
		fmt.Fprintf(&b, "%d unexpected alerts: %s", len(v.Unexpected), strings.Join(first(v.Unexpected, 10), ", "))
	}
	return strings.TrimSuffix(b.String(), "; ")
}

func first(l []string, n int) []string { return l[:min(n, len(l))] }

// required are the alerts of which a life must have one once its fault
// began; allowed those it may have besides.
var (
	required = map[Life][]string{
		Overflowing: {"PLEGPayloadOverLimit"},
		Frozen:      {"PLEGRuntimeHung"},
		Gone:        {"PLEGExporterDown"},
	}
	allowed = map[Life][]string{
		Overflowing: {"PLEGRelistStalled", "PLEGKubeletStalled", "PLEGPayloadNearLimit", "PLEGPayloadPredictedOverLimit",
			"PLEGExitedContainersPilingUp"},
		// The kubelet's relists, each waiting its 2m deadline, come minutes
		// apart, and lists that take 2m leave no room for a status pass.
		Frozen: {"PLEGRelistStalled", "PLEGKubeletStalled", "PLEGRuntimeDown", "PLEGRelistSlow", "PLEGKubeletRelistIntervalHigh",
			"PLEGStatusPassNearThreshold"},
		Creeping: {"PLEGPayloadNearLimit", "PLEGPayloadPredictedOverLimit", "PLEGExitedContainersPilingUp"},
	}
)

// Judge compares firing alerts with the lives of the fleet's nodes.
func (s *Sim) Judge(alerts []Alert) Verdict {
	v := Verdict{Missing: map[Life][]string{}, Alerted: map[Life]int{}}
	byNode := map[string][]string{}
	for _, a := range alerts {
		if a.Status.State != "" && a.Status.State != "active" {
			continue
		}
		key := a.Labels["cluster"] + "/" + a.Labels["node"]
		if _, ok := s.byKey[key]; !ok {
			v.Unexpected = append(v.Unexpected, key+" "+a.Labels["alertname"])
			continue
		}
		byNode[key] = append(byNode[key], a.Labels["alertname"])
	}
	for _, n := range s.nodes {
		key := n.Cluster + "/" + n.Name
		names := byNode[key]
		if len(names) > 0 {
			v.Alerted[n.Life]++
		}
		if req := required[n.Life]; len(req) > 0 && !anyOf(names, req) {
			v.Missing[n.Life] = append(v.Missing[n.Life], key)
		}
		for _, a := range names {
			if !contains(required[n.Life], a) && !contains(allowed[n.Life], a) {
				v.Unexpected = append(v.Unexpected, fmt.Sprintf("%s (%s) %s", key, n.Life, a))
			}
		}
	}
	for l := range v.Missing {
		sort.Strings(v.Missing[l])
		if len(v.Missing[l]) == 0 {
			delete(v.Missing, l)
		}
	}
	sort.Strings(v.Unexpected)
	return v
}

func anyOf(have, want []string) bool {
	for _, w := range want {
		if contains(have, w) {
			return true
		}
	}
	return false
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
