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
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"text/template"
	"time"

	"github.com/pleg-exporter/pleg_exporter/internal/measure"
	"github.com/pleg-exporter/pleg_exporter/internal/stack"
	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
)

// The monitoring the cluster runs, in images made here from the binaries:
// the Prometheus Operator from the module proxy (make test builds it into
// $PROMETHEUS_OPERATOR, with its config reloader and CRDs); Prometheus from
// the module proxy too ($PROMETHEUS_SERVER), since Debian's 2.42.0+ds is
// built without Kubernetes service discovery, which everything the
// operator configures relies on; Debian's Alertmanager.
const (
	OperatorVersion     = "v0.85.0"
	PrometheusVersion   = "v3.16.0"
	AlertmanagerVersion = "v0.25.0"

	monitoringNamespace = "monitoring"
	// PrometheusAddr is where the operator's Prometheus listens: on the
	// host network (it reaches the API server on loopback there, which a
	// pod cannot without kube-proxy) and, with listenLocal, on loopback only.
	// Its config reloader takes 127.0.0.1:8080.
	PrometheusAddr = "127.0.0.1:9090"
	reloaderAddr   = "127.0.0.1:8080"
)

// Images the monitoring runs, made locally (no registry is reachable).
const (
	prometheusImage   = "pleg-test/prometheus:" + PrometheusVersion
	alertmanagerImage = "pleg-test/alertmanager:" + AlertmanagerVersion
	reloaderImage     = "pleg-test/prometheus-config-reloader:" + OperatorVersion
)

// StackLabels are the labels kube-prometheus-stack's Prometheus selects
// PodMonitors, ServiceMonitors and PrometheusRules by (its release label,
// for a release named kube-prometheus-stack): the chart's default
// monitoringLabels.
var StackLabels = map[string]string{"release": "kube-prometheus-stack"}

// Monitoring is the Prometheus Operator and what it runs.
type Monitoring struct {
	// PrometheusURL is the operator's Prometheus.
	PrometheusURL string
	operator      *testenv.Daemon
	stateMetrics  *testenv.Daemon
}

// API is the Prometheus' HTTP API.
func (m *Monitoring) API() stack.API { return stack.API(m.PrometheusURL) }

// MonitoringOptions configure the monitoring.
type MonitoringOptions struct {
	// ReceiverURL is the webhook Alertmanager sends every alert to; it
	// must be reachable from a pod (on the pod network's gateway).
	ReceiverURL string
}

// operatorBinaries are the operator's build: its two commands and CRDs.
type operatorBinaries struct{ operator, reloader, crds string }

func findOperator() (operatorBinaries, error) {
	dir := os.Getenv("PROMETHEUS_OPERATOR")
	if dir == "" {
		return operatorBinaries{}, fmt.Errorf("%w: PROMETHEUS_OPERATOR is not set (make test builds the Prometheus Operator %s into .tools/ and sets it)",
			testenv.ErrUnavailable, OperatorVersion)
	}
	b := operatorBinaries{filepath.Join(dir, "operator"), filepath.Join(dir, "prometheus-config-reloader"), filepath.Join(dir, "prometheus-operator-crd")}
	for _, p := range []string{b.operator, b.reloader, b.crds} {
		if _, err := os.Stat(p); err != nil {
			return b, fmt.Errorf("%w: %v (make test builds it)", testenv.ErrUnavailable, err)
		}
	}
	return b, nil
}

// StartMonitoring installs the operator's CRDs, starts the operator (beside
// the control plane, with the admin's certificate) and has it run a
// Prometheus and an Alertmanager configured as kube-prometheus-stack
// configures them: selecting monitors and rules by StackLabels in every
// namespace, Alertmanager found through its Service. It returns once
// Prometheus is ready.
func (c *Cluster) StartMonitoring(ctx context.Context, o MonitoringOptions) (m *Monitoring, err error) {
	for _, addr := range []string{PrometheusAddr, reloaderAddr} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("%w: the operator's Prometheus needs %s on the host network: %v", testenv.ErrUnavailable, addr, err)
		}
		l.Close()
	}
	bins, err := findOperator()
	if err != nil {
		return nil, err
	}
	if err := c.monitoringImages(bins); err != nil {
		return nil, err
	}
	t0 := time.Now()
	if _, err := c.Kubectl(ctx, "apply", "--server-side", "-f", bins.crds); err != nil {
		return nil, err
	}
	if _, err := c.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=1m", "crd", "--all"); err != nil {
		return nil, err
	}
	m = &Monitoring{PrometheusURL: "http://" + PrometheusAddr}
	if m.operator, err = c.startOperator(bins); err != nil {
		return nil, err
	}
	c.monitoring = m
	if err := c.apply(ctx, monitoringObjects, map[string]any{
		"Namespace": monitoringNamespace, "APIServer": c.ControlPlane.Server, "Receiver": o.ReceiverURL,
		"Prometheus": prometheusImage, "PrometheusVersion": PrometheusVersion,
		"Alertmanager": alertmanagerImage, "AlertmanagerVersion": AlertmanagerVersion,
		"Labels": StackLabels, "KubeletPaths": []string{"/metrics", "/metrics/probes"},
	}); err != nil {
		return nil, err
	}
	var port int
	if m.stateMetrics, port, err = c.startKubeStateMetrics(ctx); err != nil {
		return nil, err
	}
	if err := c.apply(ctx, kubeStateMetricsObjects, map[string]any{
		"Namespace": monitoringNamespace, "NodeIP": c.Kubelet.NodeIP, "Port": port, "Labels": StackLabels,
	}); err != nil {
		return nil, err
	}
	if err := m.waitReady(ctx, c, 3*time.Minute); err != nil {
		return nil, err
	}
	fmt.Fprintf(c.log, "Prometheus Operator %s: Prometheus %s, Alertmanager %s and kube-state-metrics %s ready in %v\n",
		OperatorVersion, PrometheusVersion, AlertmanagerVersion, KubeStateMetricsVersion, since(t0))
	return m, nil
}

// monitoringImages makes the three images and imports them.
func (c *Cluster) monitoringImages(bins operatorBinaries) error {
	dir := filepath.Join(c.Dir, "images")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	prom := os.Getenv("PROMETHEUS_SERVER")
	if _, err := os.Stat(prom); prom == "" || err != nil {
		return fmt.Errorf("%w: PROMETHEUS_SERVER %q: make test builds Prometheus %s into .tools/ and sets it", testenv.ErrUnavailable, prom, PrometheusVersion)
	}
	am, err := exec.LookPath("prometheus-alertmanager")
	if err != nil {
		return fmt.Errorf("%w: prometheus-alertmanager not installed (make deps installs it)", testenv.ErrUnavailable)
	}
	// Debian's build reads its notification templates there.
	templates, _ := filepath.Glob("/usr/share/prometheus/alertmanager/*.tmpl")
	for _, img := range []struct {
		ref, bin, name string
		extra          []string
	}{
		{prometheusImage, prom, "prometheus", nil},
		{alertmanagerImage, am, "alertmanager", templates},
		{reloaderImage, bins.reloader, "prometheus-config-reloader", nil},
	} {
		tar := filepath.Join(dir, img.name+".tar")
		if err := testenv.WriteBinaryImage(tar, img.ref, img.bin, img.name, img.extra...); err != nil {
			return fmt.Errorf("image %s: %w", img.ref, err)
		}
		if err := c.Containerd.ImportImage(tar); err != nil {
			return err
		}
	}
	return nil
}

// startOperator runs the operator as the cluster's admin; it writes the
// kubelets into kube-system/kubelet, as kube-prometheus-stack's does.
func (c *Cluster) startOperator(bins operatorBinaries) (*testenv.Daemon, error) {
	dir := filepath.Join(c.Dir, "prometheus-operator")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	cert, key := c.ControlPlane.AdminCert()
	// Its own copy of the key: the argument that names its directory.
	own := filepath.Join(dir, "admin.key")
	b, err := os.ReadFile(key)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(own, b, 0o600); err != nil {
		return nil, err
	}
	addr, err := measure.FreeAddr()
	if err != nil {
		return nil, err
	}
	marker := "--key-file=" + own
	d, err := testenv.StartDaemon("prometheus-operator", dir, bins.operator, marker,
		"--apiserver="+c.ControlPlane.Server, "--cert-file="+cert, marker, "--ca-file="+c.ControlPlane.CAFile(),
		"--web.listen-address="+addr, "--prometheus-config-reloader="+reloaderImage,
		"--kubelet-service=kube-system/kubelet", "--log-level=info")
	if err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if d.Exited() {
			return nil, fmt.Errorf("the Prometheus Operator exited: %s", d.LastLines(10))
		}
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return d, nil
			}
		}
		if time.Now().After(deadline) {
			d.Stop()
			return nil, fmt.Errorf("the Prometheus Operator not healthy on %s after 1m: %s", addr, d.LastLines(10))
		}
	}
}

// apply renders tmpl with data and applies it.
func (c *Cluster) apply(ctx context.Context, tmpl string, data any) error {
	var b bytes.Buffer
	if err := template.Must(template.New("objects").Parse(tmpl)).Execute(&b, data); err != nil {
		return err
	}
	path := filepath.Join(c.Dir, fmt.Sprintf("objects-%d.yaml", time.Now().UnixNano()))
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		return err
	}
	_, err := c.Kubectl(ctx, "apply", "-f", path)
	return err
}

// waitReady waits for the Prometheus the operator made to answer /-/ready
// and for Alertmanager's pod.
func (m *Monitoring) waitReady(ctx context.Context, c *Cluster, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get(m.PrometheusURL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if m.operator.Exited() || time.Now().After(deadline) {
			pods, _ := c.Kubectl(ctx, "get", "pods", "--namespace", monitoringNamespace, "-o", "wide")
			return fmt.Errorf("the operator's Prometheus not ready on %s within %v: %v\n%s\noperator: %s", PrometheusAddr, timeout, err, pods, m.operator.LastLines(10))
		}
		time.Sleep(time.Second)
	}
	_, err := c.Kubectl(ctx, "rollout", "status", "statefulset/alertmanager-main", "--namespace", monitoringNamespace,
		fmt.Sprintf("--timeout=%ds", int(time.Until(deadline).Seconds())+1))
	return err
}

// stop stops the operator (its Prometheus and Alertmanager go with the
// kubelet's pods).
func (m *Monitoring) stop() error {
	if m == nil {
		return nil
	}
	var errs []error
	for _, d := range []*testenv.Daemon{m.stateMetrics, m.operator} {
		if d != nil {
			errs = append(errs, d.Stop())
		}
	}
	return errors.Join(errs...)
}

// monitoringObjects is what kube-prometheus-stack makes for its Prometheus
// and Alertmanager, reduced to one node: their service account and RBAC,
// Alertmanager's configuration (every alert to the test's webhook), the
// two resources the operator turns into StatefulSets, and the stack's
// ServiceMonitor of the kubelet.
const monitoringObjects = `
apiVersion: v1
kind: Namespace
metadata:
  name: {{.Namespace}}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: prometheus
  namespace: {{.Namespace}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: pleg-test-prometheus
rules:
  - apiGroups: [""]
    resources: [nodes, nodes/metrics, services, endpoints, pods]
    verbs: [get, list, watch]
  - apiGroups: [discovery.k8s.io]
    resources: [endpointslices]
    verbs: [get, list, watch]
  - apiGroups: [""]
    resources: [configmaps]
    verbs: [get]
  - nonResourceURLs: [/metrics, /metrics/cadvisor]
    verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: pleg-test-prometheus
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: pleg-test-prometheus
subjects:
  - kind: ServiceAccount
    name: prometheus
    namespace: {{.Namespace}}
---
apiVersion: v1
kind: Secret
metadata:
  name: alertmanager-main
  namespace: {{.Namespace}}
stringData:
  alertmanager.yaml: |
    route:
      receiver: test
      group_by: [alertname, node, severity]
      group_wait: 5s
      group_interval: 15s
      repeat_interval: 1h
    receivers:
      - name: test
        webhook_configs:
          - url: {{printf "%q" .Receiver}}
            send_resolved: true
---
apiVersion: monitoring.coreos.com/v1
kind: Alertmanager
metadata:
  name: main
  namespace: {{.Namespace}}
spec:
  image: {{.Alertmanager}}
  version: {{.AlertmanagerVersion}}
  replicas: 1
  securityContext:
    runAsUser: 1000
    runAsNonRoot: true
    fsGroup: 2000
---
apiVersion: monitoring.coreos.com/v1
kind: Prometheus
metadata:
  name: k8s
  namespace: {{.Namespace}}
spec:
  image: {{.Prometheus}}
  version: {{.PrometheusVersion}}
  replicas: 1
  serviceAccountName: prometheus
  hostNetwork: true
  listenLocal: true
  scrapeInterval: 15s
  evaluationInterval: 15s
  externalLabels:
    cluster: pleg-test
  apiserverConfig:
    host: {{.APIServer}}
    bearerTokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
    tlsConfig:
      caFile: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt
  podMonitorSelector:
    matchLabels:{{range $k, $v := .Labels}}
      {{$k}}: {{$v}}{{end}}
  podMonitorNamespaceSelector: {}
  serviceMonitorSelector:
    matchLabels:{{range $k, $v := .Labels}}
      {{$k}}: {{$v}}{{end}}
  serviceMonitorNamespaceSelector: {}
  ruleSelector:
    matchLabels:{{range $k, $v := .Labels}}
      {{$k}}: {{$v}}{{end}}
  ruleNamespaceSelector: {}
  alerting:
    alertmanagers:
      - namespace: {{.Namespace}}
        name: alertmanager-operated
        port: web
  securityContext:
    runAsUser: 1000
    runAsNonRoot: true
    fsGroup: 2000
---
# kube-prometheus-stack's kubelet ServiceMonitor (its chart's defaults):
# the operator's kubelet Service, https with the service account's token,
# honorLabels, the metrics_path relabeling; /metrics and /metrics/probes.
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: kube-prometheus-stack-kubelet
  namespace: {{.Namespace}}
  labels:{{range $k, $v := .Labels}}
    {{$k}}: {{$v}}{{end}}
spec:
  jobLabel: k8s-app
  namespaceSelector:
    matchNames: [kube-system]
  selector:
    matchLabels:
      app.kubernetes.io/name: kubelet
      k8s-app: kubelet
  endpoints:
{{- range $path := .KubeletPaths}}
    - port: https-metrics
      scheme: https
      path: {{$path}}
      honorLabels: true
      bearerTokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
      tlsConfig:
        caFile: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt
        insecureSkipVerify: true
      relabelings:
        - action: replace
          sourceLabels: [__metrics_path__]
          targetLabel: metrics_path
{{- end}}
`
