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
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
)

// KubeStateMetricsVersion is the kube-state-metrics make test builds into
// $KUBE_STATE_METRICS from the module proxy.
const KubeStateMetricsVersion = "v2.20.0"

// startKubeStateMetrics runs kube-state-metrics beside the operator, a host
// process on the node's address with the admin's kubeconfig (a pod could
// not reach the API server on loopback), limited to the nodes: its
// kube_node_status_condition is what the kubernetes-mixin's
// KubeNodeNotReady reads. It returns the daemon and its port.
func (c *Cluster) startKubeStateMetrics(ctx context.Context) (*testenv.Daemon, int, error) {
	bin := os.Getenv("KUBE_STATE_METRICS")
	if _, err := os.Stat(bin); bin == "" || err != nil {
		return nil, 0, fmt.Errorf("%w: KUBE_STATE_METRICS %q: make test builds kube-state-metrics %s into .tools/ and sets it",
			testenv.ErrUnavailable, bin, KubeStateMetricsVersion)
	}
	dir := filepath.Join(c.Dir, "kube-state-metrics")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, 0, err
	}
	// Its own copy of the kubeconfig: the argument that names its directory.
	kubeconfig := filepath.Join(dir, "kubeconfig")
	b, err := os.ReadFile(c.ControlPlane.AdminKubeconfig)
	if err != nil {
		return nil, 0, err
	}
	if err := os.WriteFile(kubeconfig, b, 0o600); err != nil {
		return nil, 0, err
	}
	port, err := freePort(c.Kubelet.NodeIP)
	if err != nil {
		return nil, 0, err
	}
	telemetry, err := freePort("127.0.0.1")
	if err != nil {
		return nil, 0, err
	}
	marker := "--kubeconfig=" + kubeconfig
	d, err := testenv.StartDaemon("kube-state-metrics", dir, bin, marker, marker, "--resources=nodes",
		"--host="+c.Kubelet.NodeIP, "--port="+strconv.Itoa(port), "--telemetry-host=127.0.0.1", "--telemetry-port="+strconv.Itoa(telemetry))
	if err != nil {
		return nil, 0, err
	}
	url := "http://" + net.JoinHostPort(c.Kubelet.NodeIP, strconv.Itoa(port)) + "/metrics"
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
		if d.Exited() {
			return nil, 0, fmt.Errorf("kube-state-metrics exited: %s", d.LastLines(10))
		}
		if body, err := get(ctx, url); err == nil && strings.Contains(body, `kube_node_status_condition{node="`+Node+`"`) {
			return d, port, nil
		}
		if time.Now().After(deadline) {
			d.Stop()
			return nil, 0, fmt.Errorf("kube-state-metrics on %s reports no node after 1m: %s", url, d.LastLines(10))
		}
	}
}

// freePort is a port free on host now.
func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func get(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", url, resp.Status)
	}
	return string(b), err
}

// kubeStateMetricsObjects make the host process a scrape target as
// kube-prometheus-stack makes its kube-state-metrics one: a Service
// labelled app.kubernetes.io/name=kube-state-metrics (here without a
// selector, its Endpoints the node's address) and the stack's
// ServiceMonitor for it (jobLabel app.kubernetes.io/name, so
// job="kube-state-metrics", honorLabels). And the kubernetes-mixin's
// KubeNodeNotReady, as the stack loads it (expression, for and severity
// from kubernetes-mixin alerts/kubelet.libsonnet, the stack's
// kubeStateMetricsSelector job="kube-state-metrics").
const kubeStateMetricsObjects = `
apiVersion: v1
kind: Service
metadata:
  name: kube-state-metrics
  namespace: {{.Namespace}}
  labels:
    app.kubernetes.io/name: kube-state-metrics
spec:
  ports:
    - name: http
      port: {{.Port}}
      targetPort: {{.Port}}
---
apiVersion: v1
kind: Endpoints
metadata:
  name: kube-state-metrics
  namespace: {{.Namespace}}
  labels:
    app.kubernetes.io/name: kube-state-metrics
subsets:
  - addresses:
      - ip: {{.NodeIP}}
    ports:
      - name: http
        port: {{.Port}}
---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: kube-prometheus-stack-kube-state-metrics
  namespace: {{.Namespace}}
  labels:{{range $k, $v := .Labels}}
    {{$k}}: {{$v}}{{end}}
spec:
  jobLabel: app.kubernetes.io/name
  selector:
    matchLabels:
      app.kubernetes.io/name: kube-state-metrics
  endpoints:
    - port: http
      honorLabels: true
---
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: kube-prometheus-stack-kubernetes-system-kubelet
  namespace: {{.Namespace}}
  labels:{{range $k, $v := .Labels}}
    {{$k}}: {{$v}}{{end}}
spec:
  groups:
    - name: kubernetes-system-kubelet
      rules:
        - alert: KubeNodeNotReady
          expr: kube_node_status_condition{job="kube-state-metrics",condition="Ready",status="true"} == 0
          for: 15m
          labels:
            severity: warning
          annotations:
            description: '{{"{{"}} $labels.node {{"}}"}} has been unready for more than 15 minutes.'
            summary: Node is not ready.
`
