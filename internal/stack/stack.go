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

// Package stack starts the whole chain a user deploys, on loopback and in
// one directory: a private containerd (and dockerd for the Docker view),
// the exporter, Debian's Prometheus with the mixin's rules, and Debian's
// Alertmanager. The end-to-end test and make demo both use it.
package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/pleg-exporter/pleg_exporter/internal/criproxy"
	"github.com/pleg-exporter/pleg_exporter/internal/measure"
	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
)

// Node is the node label the stack gives the exporter's target.
const Node = "demo-node"

// Options configure a stack.
type Options struct {
	Dir            string // everything lives here
	ExporterBinary string // built pleg_exporter
	RulesDir       string // mixin/generated
	// ReceiverURL is a webhook for every alert; empty routes to a receiver
	// without integrations (alerts are visible in the Alertmanager UI).
	ReceiverURL    string
	RelistInterval string // default 10s, the exporter's default
	WithDocker     bool   // add a private dockerd as the exporter's Docker view
	Log            io.Writer
	// Addrs pins listen addresses by process name (pleg_exporter,
	// prometheus, alertmanager); others get a free loopback port.
	Addrs map[string]string
	// Kubelet, when set, is a built kubelet run in standalone mode on the
	// private containerd (which then gets a pod network), scraped by
	// Prometheus as job "kubelet".
	Kubelet string
	// MinContainerTTL keeps exited containers of pods the kubelet does not
	// know from its container GC (see testenv.KubeletOptions).
	MinContainerTTL time.Duration
	// BeforeKubelet runs on the fresh containerd before the kubelet starts.
	BeforeKubelet func(*testenv.Containerd) error
	// ContainerdBinaries runs a containerd 2.x instead of Debian's 1.6
	// (testenv.ContainerdOptions.Binaries).
	ContainerdBinaries string
	// FeatureGates are the kubelet's (testenv.KubeletOptions.FeatureGates).
	FeatureGates map[string]bool
	// KubeletIntoOverflow: see testenv.KubeletOptions.StartIntoOverflow.
	KubeletIntoOverflow bool
	// CRIProxy puts a fault-injecting CRI proxy (Stack.Proxy) between the
	// containerd and both the kubelet and the exporter.
	CRIProxy bool
}

// Proc is a process the stack started.
type Proc struct {
	Name string
	Addr string // host:port it serves on
	cmd  *exec.Cmd
	done chan struct{}
}

// URL is the process's base URL.
func (p *Proc) URL() string { return "http://" + p.Addr }

// Stack is a running chain.
type Stack struct {
	opts         Options
	Containerd   *testenv.Containerd
	Dockerd      *testenv.Dockerd
	Kubelet      *testenv.Kubelet
	Proxy        *criproxy.Proxy // with Options.CRIProxy
	Exporter     *Proc
	Prometheus   *Proc
	Alertmanager *Proc
}

// Check reports whether the stack can run here.
func Check() error {
	return testenv.Check("containerd", "runc", "busybox", "prometheus", "prometheus-alertmanager")
}

// Start brings the stack up and waits until every part is ready.
func Start(o Options) (s *Stack, err error) {
	if err := Check(); err != nil {
		return nil, err
	}
	if o.RelistInterval == "" {
		o.RelistInterval = "10s"
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	o.Dir, err = filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	st := &Stack{opts: o}
	s = st
	defer func() {
		// On an error s is nil by now: stop what was started through st.
		if err != nil {
			st.Stop()
		}
	}()
	if s.Containerd, err = testenv.StartContainerdWith(filepath.Join(o.Dir, "containerd"),
		testenv.ContainerdOptions{PodNetwork: o.Kubelet != "", Binaries: o.ContainerdBinaries}); err != nil {
		return nil, err
	}
	if o.BeforeKubelet != nil {
		if err := o.BeforeKubelet(s.Containerd); err != nil {
			return nil, err
		}
	}
	endpoint := s.Containerd.Endpoint()
	if o.CRIProxy {
		if s.Proxy, err = criproxy.Start(filepath.Join(o.Dir, "criproxy.sock"), endpoint); err != nil {
			return nil, err
		}
		endpoint = s.Proxy.Endpoint()
	}
	if o.Kubelet != "" {
		kubeletEndpoint := ""
		if s.Proxy != nil {
			kubeletEndpoint = endpoint
		}
		if s.Kubelet, err = testenv.StartKubelet(testenv.KubeletOptions{
			Binary: o.Kubelet, Dir: filepath.Join(o.Dir, "kubelet"), Runtime: s.Containerd, RuntimeEndpoint: kubeletEndpoint,
			MinContainerTTL: o.MinContainerTTL, FeatureGates: o.FeatureGates, StartIntoOverflow: o.KubeletIntoOverflow,
		}); err != nil {
			return nil, err
		}
		fmt.Fprintf(o.Log, "kubelet %s ready: read-only port %s, log %s\n", testenv.KubeletVersion, s.Kubelet.ReadOnlyAddr, s.Kubelet.LogPath)
	}
	args := []string{"--runtime.endpoint=" + endpoint, "--relist.interval=" + o.RelistInterval, "--docker.host=none", "--collector.namespaces"}
	if o.WithDocker {
		if s.Dockerd, err = testenv.StartDockerd(filepath.Join(o.Dir, "docker")); err != nil {
			return nil, err
		}
		args[2] = "--docker.host=" + s.Dockerd.Endpoint()
	}
	if s.Exporter, err = s.start("pleg_exporter", o.ExporterBinary, func(addr string) []string {
		return append(args, "--web.listen-address="+addr)
	}, "/-/ready"); err != nil {
		return nil, err
	}
	if s.Alertmanager, err = s.startAlertmanager(); err != nil {
		return nil, err
	}
	if s.Prometheus, err = s.startPrometheus(); err != nil {
		return nil, err
	}
	return s, nil
}

var freeAddr = measure.FreeAddr

func (s *Stack) start(name, bin string, args func(addr string) []string, ready string) (*Proc, error) {
	addr := s.opts.Addrs[name]
	if addr == "" {
		var err error
		if addr, err = freeAddr(); err != nil {
			return nil, err
		}
	} else if l, err := net.Listen("tcp", addr); err != nil {
		return nil, fmt.Errorf("%s: %s is taken: %w", name, addr, err)
	} else {
		l.Close()
	}
	logf, err := os.Create(filepath.Join(s.opts.Dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args(addr)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, Addr: addr, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); logf.Close(); close(p.done) }()
	os.WriteFile(filepath.Join(s.opts.Dir, name+".pid"), []byte(fmt.Sprint(cmd.Process.Pid)), 0o644)
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case <-p.done:
			b, _ := os.ReadFile(filepath.Join(s.opts.Dir, name+".log"))
			return nil, fmt.Errorf("%s exited during start-up: %s", name, lastLines(string(b), 10))
		default:
		}
		resp, err := http.Get(p.URL() + ready)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				fmt.Fprintf(s.opts.Log, "%s ready on %s\n", name, p.URL())
				return p, nil
			}
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("%s not ready on %s after 90s: %v", name, addr, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (p *Proc) stop() {
	if p == nil {
		return
	}
	testenv.StopProcess(p.cmd, p.done, 15*time.Second)
}

func (s *Stack) startAlertmanager() (*Proc, error) {
	receiver := `  - name: default`
	if s.opts.ReceiverURL != "" {
		receiver = fmt.Sprintf(`  - name: default
    webhook_configs:
      - url: %q
        send_resolved: true`, s.opts.ReceiverURL)
	}
	cfg := fmt.Sprintf(`route:
  receiver: default
  group_by: [alertname, node, severity]
  group_wait: 5s
  group_interval: 15s
  repeat_interval: 1h
receivers:
%s
`, receiver)
	path := filepath.Join(s.opts.Dir, "alertmanager.yml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	return s.start("alertmanager", "prometheus-alertmanager", func(addr string) []string {
		return []string{"--config.file=" + path, "--storage.path=" + filepath.Join(s.opts.Dir, "alertmanager-data"),
			"--web.listen-address=" + addr, "--cluster.listen-address="}
	}, "/-/ready")
}

func (s *Stack) startPrometheus() (*Proc, error) {
	rules, err := filepath.Abs(s.opts.RulesDir)
	if err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 15s
  evaluation_interval: 15s
rule_files:
  - %q
  - %q
alerting:
  alertmanagers:
    - static_configs:
        - targets: [%q]
scrape_configs:
  - job_name: pleg-exporter
    static_configs:
      - targets: [%q]
        labels:
          node: %s
`, filepath.Join(rules, "prometheus_rules.yaml"), filepath.Join(rules, "prometheus_alerts.yaml"),
		s.Alertmanager.Addr, s.Exporter.Addr, Node)
	if s.Kubelet != nil {
		cfg += fmt.Sprintf(`  - job_name: kubelet
    static_configs:
      - targets: [%q]
        labels:
          node: %s
`, s.Kubelet.ReadOnlyAddr, Node)
	}
	path := filepath.Join(s.opts.Dir, "prometheus.yml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	return s.start("prometheus", "prometheus", func(addr string) []string {
		return []string{"--config.file=" + path, "--storage.tsdb.path=" + filepath.Join(s.opts.Dir, "prometheus-data"),
			"--web.listen-address=" + addr}
	}, "/-/ready")
}

// Stop stops everything the stack started, in reverse order.
func (s *Stack) Stop() {
	s.Prometheus.stop()
	s.Alertmanager.stop()
	s.Exporter.stop()
	if s.Kubelet != nil {
		if err := s.Kubelet.Stop(); err != nil {
			fmt.Fprintf(s.opts.Log, "kubelet teardown: %v\n", err)
		}
	}
	if s.Proxy != nil {
		s.Proxy.Close()
	}
	if s.Dockerd != nil {
		s.Dockerd.Stop()
	}
	if s.Containerd != nil {
		if err := s.Containerd.Stop(); err != nil {
			fmt.Fprintf(s.opts.Log, "containerd teardown: %v\n", err)
		}
	}
}

// Sample is one element of an instant query's result.
type Sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// API is the Prometheus HTTP API at a base URL: the stack's Prometheus, or
// any other (the operator's in internal/cluster).
type API string

// API is the stack's Prometheus.
func (s *Stack) API() API { return API(s.Prometheus.URL()) }

// Query runs an instant PromQL query against the stack's Prometheus.
func (s *Stack) Query(ctx context.Context, q string) ([]Sample, error) { return s.API().Query(ctx, q) }

// QueryAt runs an instant query against the stack's Prometheus at a past time.
func (s *Stack) QueryAt(ctx context.Context, q string, at time.Time) ([]Sample, error) {
	return s.API().QueryAt(ctx, q, at)
}

// QueryRange runs a range query against the stack's Prometheus.
func (s *Stack) QueryRange(ctx context.Context, q string, start, end time.Time, step time.Duration) ([]Series, error) {
	return s.API().QueryRange(ctx, q, start, end, step)
}

// Query runs an instant PromQL query.
func (a API) Query(ctx context.Context, q string) ([]Sample, error) {
	var out []Sample
	err := a.get(ctx, "/api/v1/query?query="+url.QueryEscape(q), &out)
	return out, err
}

// QueryAt runs an instant query at a past time.
func (a API) QueryAt(ctx context.Context, q string, at time.Time) ([]Sample, error) {
	var out []Sample
	err := a.get(ctx, fmt.Sprintf("/api/v1/query?query=%s&time=%.3f", url.QueryEscape(q), float64(at.UnixMilli())/1000), &out)
	return out, err
}

// Series is one series of a range query: [unix seconds, "value"] pairs.
type Series struct {
	Metric map[string]string `json:"metric"`
	Values [][2]any          `json:"values"`
}

// QueryRange runs a range query.
func (a API) QueryRange(ctx context.Context, q string, start, end time.Time, step time.Duration) ([]Series, error) {
	var out []Series
	err := a.get(ctx, fmt.Sprintf("/api/v1/query_range?query=%s&start=%d&end=%d&step=%d",
		url.QueryEscape(q), start.Unix(), end.Unix(), int(step.Seconds())), &out)
	return out, err
}

// get calls the API and decodes the result of a query into out.
func (a API) get(ctx context.Context, path string, out any) error {
	data, err := a.data(ctx, path)
	if err != nil {
		return err
	}
	var res struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if res.ResultType == "scalar" {
		if p, ok := out.(*[]Sample); ok {
			*p = []Sample{{}}
		}
		return nil
	}
	return json.Unmarshal(res.Result, out)
}

// data calls the API and returns its answer's data.
func (a API) data(ctx context.Context, path string) (json.RawMessage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, string(a)+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if body.Status != "success" {
		return nil, errors.New(body.Error)
	}
	return body.Data, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
