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

package deploy

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
)

const chart = "helm/pleg-exporter"

// The chart's runtime profiles and the kustomize overlay each one stands
// for: the same sockets, the same mounted directory.
var profiles = map[string]string{
	"containerd":  "overlays/containerd",
	"crio":        "overlays/crio",
	"cri-dockerd": "overlays/cri-dockerd",
}

// helmMajor is the Helm the tests are written against: the schema
// validator's messages and the flags are Helm 4's.
const helmMajor = "v4."

var helmChecked = map[string]error{}

// helm runs the pinned Helm CLI make test builds (HELM), or the one on PATH;
// another major version skips the test (fails it in CI).
func helm(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	bin := testenv.RequireTool(t, cmp.Or(os.Getenv("HELM"), "helm"))
	err, ok := helmChecked[bin]
	if !ok {
		out, verr := exec.Command(bin, "version", "--short").Output()
		if err = verr; err == nil && !strings.HasPrefix(string(out), helmMajor) {
			err = fmt.Errorf("%s is Helm %s, the tests need Helm 4 (make test builds it)", bin, bytes.TrimSpace(out))
		}
		helmChecked[bin] = err
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	cmd := exec.Command(bin, args...)
	// No repositories, no plugins, no cache of the user's: an offline, hermetic Helm.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("helm %s: %v: %s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out, nil
}

// rendered is one `helm template` of the chart, every object decoded
// strictly into its API type.
type rendered struct {
	kinds map[string]int
	ds    appsv1.DaemonSet
	sa    corev1.ServiceAccount
	svc   corev1.Service
	pm    *monitoringv1.PodMonitor
	sm    *monitoringv1.ServiceMonitor
	rule  *monitoringv1.PrometheusRule
	// labels of every object, by kind.
	labels map[string]map[string]string
}

func helmTemplate(t *testing.T, set ...string) *rendered {
	t.Helper()
	args := []string{"template", "pleg-exporter", chart, "--namespace", "pleg-exporter"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := helm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return decodeObjects(t, out)
}

func decodeObjects(t *testing.T, out []byte) *rendered {
	t.Helper()
	r := &rendered{kinds: map[string]int{}, labels: map[string]map[string]string{}}
	for _, doc := range bytes.Split(out, []byte("\n---\n")) {
		var meta struct {
			Kind     string
			Metadata struct {
				Namespace string
				Labels    map[string]string
			}
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		if meta.Kind == "" {
			continue // the leading "---" and the template's comments
		}
		r.kinds[meta.Kind]++
		r.labels[meta.Kind] = meta.Metadata.Labels
		if meta.Metadata.Namespace != "pleg-exporter" {
			t.Errorf("%s in namespace %q, not the release's", meta.Kind, meta.Metadata.Namespace)
		}
		switch meta.Kind {
		case "ServiceAccount":
			strict(t, doc, &r.sa)
		case "Service":
			strict(t, doc, &r.svc)
		case "DaemonSet":
			strict(t, doc, &r.ds)
		case "PodMonitor":
			r.pm = &monitoringv1.PodMonitor{}
			strict(t, doc, r.pm)
		case "ServiceMonitor":
			r.sm = &monitoringv1.ServiceMonitor{}
			strict(t, doc, r.sm)
		case "PrometheusRule":
			r.rule = &monitoringv1.PrometheusRule{}
			strict(t, doc, r.rule)
		default:
			t.Errorf("unexpected kind %q", meta.Kind)
		}
	}
	return r
}

// kustomized decodes one kustomize overlay the same way.
func kustomized(t *testing.T, dir string) *rendered {
	t.Helper()
	out := render(t, dir)
	var docs [][]byte
	for _, doc := range bytes.Split(out, []byte("\n---\n")) {
		var meta struct{ Kind string }
		yaml.Unmarshal(doc, &meta)
		if meta.Kind != "Namespace" { // the chart installs into the release's namespace
			docs = append(docs, doc)
		}
	}
	return decodeObjects(t, bytes.Join(docs, []byte("\n---\n")))
}

func TestHelmLint(t *testing.T) {
	for profile := range profiles {
		for _, extra := range [][]string{nil, {"podMonitor.enabled=true", "prometheusRule.enabled=true"}, {"serviceMonitor.enabled=true"}} {
			args := []string{"lint", "--strict", chart, "--namespace", "pleg-exporter", "--set", "runtime.profile=" + profile}
			for _, s := range extra {
				args = append(args, "--set", s)
			}
			out, err := helm(t, args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if !bytes.Contains(out, []byte("0 chart(s) failed")) {
				t.Errorf("helm %s:\n%s", strings.Join(args, " "), out)
			}
		}
	}
}

// Every runtime profile with every monitoring toggle: the objects decode
// strictly into their API types, the DaemonSet has the security properties
// the kustomize overlays have, and where the chart and the overlay describe
// the same object, they describe it the same way.
func TestHelmTemplate(t *testing.T) {
	monitors := map[string][]string{
		"none":           nil,
		"podMonitor":     {"podMonitor.enabled=true"},
		"serviceMonitor": {"serviceMonitor.enabled=true"},
	}
	for profile, overlay := range profiles {
		want := kustomized(t, overlay)
		for monitor, set := range monitors {
			for _, rule := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/rule=%t", profile, monitor, rule)
				t.Run(name, func(t *testing.T) {
					set := append([]string{"runtime.profile=" + profile, fmt.Sprintf("prometheusRule.enabled=%t", rule)}, set...)
					r := helmTemplate(t, set...)
					wantKinds := map[string]int{"ServiceAccount": 1, "Service": 1, "DaemonSet": 1}
					if monitor != "none" {
						wantKinds[strings.ToUpper(monitor[:1])+monitor[1:]] = 1
					}
					if rule {
						wantKinds["PrometheusRule"] = 1
					}
					if !reflect.DeepEqual(r.kinds, wantKinds) {
						t.Errorf("objects %v, want %v", r.kinds, wantKinds)
					}
					ov := overlays[overlay]
					checkDaemonSet(t, &r.ds, ov.endpoint, ov.dir, profile == "cri-dockerd")
					compareWithKustomize(t, r, want)
					for kind, l := range r.labels {
						if l["app.kubernetes.io/name"] != "pleg-exporter" || l["app.kubernetes.io/instance"] != "pleg-exporter" {
							t.Errorf("%s labels %v", kind, l)
						}
					}
					if r.pm != nil {
						checkPodMonitor(t, r.pm)
					}
					if r.sm != nil {
						checkServiceMonitor(t, r.sm, &r.svc, want.pm)
					}
					if r.rule != nil {
						checkRule(t, r.rule)
					}
					// What a kube-prometheus-stack install selects on (release=<its name>), by default
					// its install instructions' name.
					for _, kind := range []string{"PodMonitor", "ServiceMonitor", "PrometheusRule"} {
						if l, ok := r.labels[kind]; ok && l["release"] != "kube-prometheus-stack" {
							t.Errorf("%s labels %v: no release label for kube-prometheus-stack", kind, l)
						}
					}
				})
			}
		}
	}
}

// compareWithKustomize: the pod the chart runs is the overlay's pod, field
// for field; the Service and the PodMonitor differ only in the selector
// (the chart's pods also carry app.kubernetes.io/instance); the
// PrometheusRule holds the same groups.
func compareWithKustomize(t *testing.T, got, want *rendered) {
	t.Helper()
	if !reflect.DeepEqual(got.ds.Spec.Template.Spec, want.ds.Spec.Template.Spec) {
		t.Errorf("the chart's pod spec differs from the overlay's:\n%s", yamlDiff(got.ds.Spec.Template.Spec, want.ds.Spec.Template.Spec))
	}
	if !reflect.DeepEqual(got.ds.Spec.UpdateStrategy, want.ds.Spec.UpdateStrategy) {
		t.Errorf("updateStrategy %+v, kustomize %+v", got.ds.Spec.UpdateStrategy, want.ds.Spec.UpdateStrategy)
	}
	if !reflect.DeepEqual(got.sa.AutomountServiceAccountToken, want.sa.AutomountServiceAccountToken) {
		t.Error("the ServiceAccount mounts a token")
	}
	gs, ws := got.svc.Spec, want.svc.Spec
	gs.Selector, ws.Selector = nil, nil
	if !reflect.DeepEqual(gs, ws) {
		t.Errorf("Service spec %+v, kustomize %+v", gs, ws)
	}
	if !selects(got.svc.Spec.Selector, got.ds.Spec.Template.Labels) || !selects(got.ds.Spec.Selector.MatchLabels, got.ds.Spec.Template.Labels) {
		t.Error("the Service or the DaemonSet does not select the chart's pods")
	}
	if got.pm != nil {
		gp, wp := got.pm.Spec, want.pm.Spec
		if !selects(gp.Selector.MatchLabels, got.ds.Spec.Template.Labels) {
			t.Errorf("PodMonitor selector %v does not select the pods %v", gp.Selector.MatchLabels, got.ds.Spec.Template.Labels)
		}
		gp.Selector, wp.Selector = want.pm.Spec.Selector, want.pm.Spec.Selector
		if !reflect.DeepEqual(gp, wp) {
			t.Errorf("PodMonitor spec %+v, kustomize %+v", gp, wp)
		}
	}
	if got.rule != nil && !reflect.DeepEqual(got.rule.Spec, want.rule.Spec) {
		t.Error("the chart's PrometheusRule differs from deploy/kubernetes/base/prometheusrule.yaml")
	}
}

// yamlDiff lists the lines of got's YAML that want's lacks (+) and the
// other way round (-).
func yamlDiff(got, want any) string {
	g, _ := yaml.Marshal(got)
	w, _ := yaml.Marshal(want)
	gl, wl := strings.Split(string(g), "\n"), strings.Split(string(w), "\n")
	var out []string
	for _, l := range gl {
		if !slices.Contains(wl, l) {
			out = append(out, "+ chart:     "+l)
		}
	}
	for _, l := range wl {
		if !slices.Contains(gl, l) {
			out = append(out, "- kustomize: "+l)
		}
	}
	return strings.Join(out, "\n")
}

func selects(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// The ServiceMonitor scrapes the Service's endpoints the way the PodMonitor
// scrapes the pods: the same job label, interval, timeout and node label.
func checkServiceMonitor(t *testing.T, sm *monitoringv1.ServiceMonitor, svc *corev1.Service, pm *monitoringv1.PodMonitor) {
	t.Helper()
	if sm.Spec.JobLabel != "app.kubernetes.io/name" || svc.Labels[sm.Spec.JobLabel] != "pleg-exporter" {
		t.Errorf("ServiceMonitor jobLabel %q: the Service's value %q, want pleg-exporter", sm.Spec.JobLabel, svc.Labels[sm.Spec.JobLabel])
	}
	if !selects(sm.Spec.Selector.MatchLabels, svc.Labels) {
		t.Errorf("ServiceMonitor selector %v does not select the Service %v", sm.Spec.Selector.MatchLabels, svc.Labels)
	}
	if len(sm.Spec.Endpoints) != 1 || len(pm.Spec.PodMetricsEndpoints) != 1 {
		t.Fatalf("ServiceMonitor endpoints %+v", sm.Spec.Endpoints)
	}
	e, p := sm.Spec.Endpoints[0], pm.Spec.PodMetricsEndpoints[0]
	if e.Port != svc.Spec.Ports[0].Name || e.Interval != p.Interval || e.ScrapeTimeout != p.ScrapeTimeout ||
		!reflect.DeepEqual(e.RelabelConfigs, p.RelabelConfigs) || e.HonorLabels != p.HonorLabels {
		t.Errorf("ServiceMonitor endpoint %+v, PodMonitor's %+v", e, p)
	}
}

// Values a user sets: each reaches the object it names, and the DaemonSet
// keeps its security properties.
func TestHelmValues(t *testing.T) {
	t.Run("k3s socket", func(t *testing.T) {
		r := helmTemplate(t, "runtime.socket=/run/k3s/containerd/containerd.sock")
		checkDaemonSet(t, &r.ds, "unix:///host/run/k3s/containerd/containerd.sock", "/run/k3s/containerd", false)
	})
	t.Run("cri-dockerd sockets", func(t *testing.T) {
		r := helmTemplate(t, "runtime.profile=cri-dockerd", "runtime.socket=/run/cri-dockerd.sock", "runtime.dockerSocket=/run/docker.sock")
		checkDaemonSet(t, &r.ds, "unix:///host/run/cri-dockerd.sock", "/run", true)
		if a := r.ds.Spec.Template.Spec.Containers[0].Args; a[1] != "--docker.host=unix:///host/run/docker.sock" {
			t.Errorf("args %q", a)
		}
	})
	t.Run("extra args", func(t *testing.T) {
		r := helmTemplate(t, "extraArgs={--relist.interval=5s,--collector.namespaces}")
		a := r.ds.Spec.Template.Spec.Containers[0].Args
		if n := len(a); n != 5 || a[3] != "--relist.interval=5s" || a[4] != "--collector.namespaces" {
			t.Errorf("args %q: want the chart's three, then the extra two", a)
		}
	})
	t.Run("pleg threshold", func(t *testing.T) {
		a := helmTemplate(t, "plegThreshold=10m", "extraArgs={--relist.interval=5s}").ds.Spec.Template.Spec.Containers[0].Args
		if n := len(a); n != 5 || a[3] != "--pleg.threshold=10m" || a[4] != "--relist.interval=5s" {
			t.Errorf("args %q: want the chart's three, --pleg.threshold=10m, then the extra one", a)
		}
		for _, arg := range helmTemplate(t).ds.Spec.Template.Spec.Containers[0].Args {
			if strings.HasPrefix(arg, "--pleg.threshold") {
				t.Errorf("without plegThreshold the chart sets %s; the exporter's default must hold", arg)
			}
		}
	})
	t.Run("image", func(t *testing.T) {
		digest := "sha256:" + strings.Repeat("ab", 32)
		c := helmTemplate(t, "image.repository=registry.example/pleg-exporter", "image.digest="+digest).ds.Spec.Template.Spec.Containers[0]
		if c.Image != "registry.example/pleg-exporter@"+digest {
			t.Errorf("image %q", c.Image)
		}
		c = helmTemplate(t, "image.tag=0.2.0", "image.pullPolicy=Always").ds.Spec.Template.Spec.Containers[0]
		if c.Image != "pleg-exporter:0.2.0" || c.ImagePullPolicy != corev1.PullAlways {
			t.Errorf("image %q, pull policy %s", c.Image, c.ImagePullPolicy)
		}
	})
	t.Run("scheduling", func(t *testing.T) {
		r := helmTemplate(t, "priorityClassName=pleg", "tolerations[0].key=dedicated", "tolerations[0].operator=Equal",
			"tolerations[0].value=infra", "tolerations[0].effect=NoSchedule", "resources.limits.memory=1Gi", "podAnnotations.a=b")
		s := r.ds.Spec.Template.Spec
		if s.PriorityClassName != "pleg" || len(s.Tolerations) != 1 || s.Tolerations[0].Key != "dedicated" ||
			s.Containers[0].Resources.Limits.Memory().String() != "1Gi" || r.ds.Spec.Template.Annotations["a"] != "b" {
			t.Errorf("pod spec %+v", s)
		}
	})
	t.Run("names", func(t *testing.T) {
		out, err := helm(t, "template", "monitoring", chart, "--namespace", "pleg-exporter", "--set", "podMonitor.enabled=true",
			"--set", "monitoringLabels.release=prom", "--set", "podMonitor.additionalLabels.team=node")
		if err != nil {
			t.Fatal(err)
		}
		r := decodeObjects(t, out)
		if r.ds.Name != "monitoring-pleg-exporter" || r.ds.Spec.Template.Spec.ServiceAccountName != r.sa.Name || r.sa.Name != r.ds.Name {
			t.Errorf("DaemonSet %s, ServiceAccount %s (%s)", r.ds.Name, r.sa.Name, r.ds.Spec.Template.Spec.ServiceAccountName)
		}
		if l := r.labels["PodMonitor"]; l["release"] != "prom" || l["team"] != "node" {
			t.Errorf("PodMonitor labels %v", l)
		}
		checkPodMonitor(t, r.pm)
		r = helmTemplate(t, "serviceAccount.create=false", "fullnameOverride=pleg")
		if r.kinds["ServiceAccount"] != 0 || r.ds.Name != "pleg" || r.ds.Spec.Template.Spec.ServiceAccountName != "default" {
			t.Errorf("objects %v, DaemonSet %s with service account %q", r.kinds, r.ds.Name, r.ds.Spec.Template.Spec.ServiceAccountName)
		}
	})
}

// A typo or a wrong value fails at install time, naming what is wrong.
func TestHelmRejectsBadValues(t *testing.T) {
	for _, c := range []struct{ set, want string }{
		{"podMonitr.enabled=true", "additional properties 'podMonitr' not allowed"},
		{"runtime.profile=docker", "/runtime/profile"},
		{"runtime.sockett=/run/x.sock", "'sockett' not allowed"},
		{"runtime.socket=containerd.sock", "/runtime/socket"},
		{"runtime.socket=/containerd.sock", "in a directory below /"},
		{"runtime.socket=/run/../containerd.sock", "want the socket's clean absolute path"},
		{"runtime.dockerSocket=/var/run/docker.sock", "only with runtime.profile cri-dockerd"},
		{"resources.limits.memory=lots", "/resources/limits/memory"},
		{"resources.limit.memory=1Gi", "'limit' not allowed"},
		{"extraArgs=--relist.interval=5s", "/extraArgs"},
		{"extraArgs={relist.interval=5s}", "/extraArgs/0"},
		{"extraArgs={--web.listen-address=:9100}", "--web.listen-address is not for extraArgs"},
		{"extraArgs={--runtime.endpoint=unix:///x.sock}", "--runtime.endpoint is not for extraArgs"},
		{"image.digest=sha256:abc", "/image/digest"},
		{"image.pullPolicy=Sometimes", "/image/pullPolicy"},
		{"tolerations[0].efect=NoSchedule", "'efect' not allowed"},
		{"podMonitor.interval=15", "/podMonitor/interval"},
		{"podMonitor.enabled=yes", "/podMonitor/enabled"},
		{"fullnameOverride=Pleg_Exporter", "/fullnameOverride"},
		{"nameOverride=pleg", "'nameOverride' not allowed"},
		{"runtime=null", "missing property 'runtime'"},
		{"runtime.socket=/run/a #b/c.sock", "/runtime/socket"},
		{`podLabels.app\.kubernetes\.io/name=other`, "/podLabels/app.kubernetes.io~1name"},
		{"monitoringLabels.release=a b", "/monitoringLabels/release"},
		{"prometheusRule.additionalLabels.role=other", "/prometheusRule/additionalLabels/role"},
		{"extraArgs={--docker.host unix:///x.sock}", "/extraArgs/0"},
		{"extraArgs={--web.config.file=/etc/web.yml}", "--web.config.file is not for extraArgs"},
		{"extraArgs={--runtime=docker}", "--runtime is not for extraArgs"},
		{"extraArgs={--pleg.threshold=10m}", "--pleg.threshold is not for extraArgs: set plegThreshold"},
		{"plegThreshold=10 minutes", "/plegThreshold"},
		{"plegThreshold=600", "/plegThreshold"},
		{"tolerations[0].operator=Exists,tolerations[0].value=x", "/tolerations/0/value"},
		{"resources.requests.cpu=-1", "/resources/requests/cpu"},
		{"image.repository=pleg-exporter:0.1.0", "/image/repository"},
		{"priorityClassName=Node_Critical", "/priorityClassName"},
		{"runtime.profile=cri-dockerd,runtime.dockerSocket=/var/run/", "runtime.dockerSocket \"/var/run/\": want the socket's clean absolute path"},
		{"runtime.profile=cri-dockerd,runtime.dockerSocket=/var/run/cri-dockerd.sock", "is the CRI socket"},
	} {
		t.Run(c.set, func(t *testing.T) {
			out, err := helm(t, "template", "pleg-exporter", chart, "--set", c.set)
			if err == nil {
				t.Fatalf("--set %s rendered:\n%.300s", c.set, out)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("--set %s: %v\nwant it to say %q", c.set, err, c.want)
			}
		})
	}
	t.Run("both monitors", func(t *testing.T) {
		_, err := helm(t, "template", "pleg-exporter", chart, "--set", "podMonitor.enabled=true", "--set", "serviceMonitor.enabled=true")
		if err == nil || !strings.Contains(err.Error(), "choose one") {
			t.Errorf("PodMonitor and ServiceMonitor both: %v", err)
		}
	})
	t.Run("docker socket elsewhere", func(t *testing.T) {
		_, err := helm(t, "template", "pleg-exporter", chart, "--set", "runtime.profile=cri-dockerd", "--set", "runtime.dockerSocket=/run/docker.sock")
		if err == nil || !strings.Contains(err.Error(), "is not in the directory of the CRI socket /var/run/cri-dockerd.sock") {
			t.Errorf("sockets in two directories: %v", err)
		}
	})
}

// NOTES.txt tells the user how to check the install: the DaemonSet by name,
// the metrics through the API server, the monitor and the rule groups the
// chart really installs.
func TestHelmNotes(t *testing.T) {
	out, err := helm(t, "install", "pleg", chart, "--dry-run=client", "--namespace", "node-monitoring",
		"--set", "runtime.profile=crio", "--set", "podMonitor.enabled=true", "--set", "prometheusRule.enabled=true")
	if err != nil {
		t.Fatal(err)
	}
	_, notes, ok := bytes.Cut(out, []byte("\nNOTES:\n"))
	if !ok {
		t.Fatalf("no NOTES:\n%s", out)
	}
	var rules struct{ Groups []struct{ Name string } }
	b, err := os.ReadFile(filepath.Join(chart, "files", "prometheus-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &rules); err != nil || len(rules.Groups) == 0 {
		t.Fatalf("the chart's rules: %v", err)
	}
	want := []string{
		"relists crio through /var/run/crio/crio.sock",
		"kubectl -n node-monitoring rollout status daemonset/pleg-pleg-exporter",
		"/api/v1/namespaces/node-monitoring/pods/$POD:10391/proxy/metrics",
		"app.kubernetes.io/instance=pleg ",
		"PodMonitor node-monitoring/pleg-pleg-exporter, label release=kube-prometheus-stack",
		`up{job="pleg-exporter"}`,
		"podMonitorSelector",
	}
	for _, g := range rules.Groups {
		want = append(want, g.Name)
	}
	for _, w := range want {
		if !bytes.Contains(notes, []byte(w)) {
			t.Errorf("NOTES lack %q:\n%s", w, notes)
		}
	}

	// The label the NOTES name is the one on the object, with or without
	// monitoringLabels.
	out, err = helm(t, "install", "pleg-exporter", chart, "--dry-run=client", "--namespace", "pleg-exporter",
		"--set", "monitoringLabels=null", "--set", "serviceMonitor.enabled=true", "--set", "serviceMonitor.additionalLabels.release=prom")
	if err != nil {
		t.Fatal(err)
	}
	if w := "ServiceMonitor pleg-exporter/pleg-exporter, label release=prom)"; !bytes.Contains(out, []byte(w)) {
		t.Errorf("NOTES lack %q:\n%s", w, out)
	}
}

// The chart's versions follow the VERSION file, and the image it names is
// the one make image tags.
func TestHelmChartVersion(t *testing.T) {
	v, err := os.ReadFile(filepath.Join("..", "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(chart, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		APIVersion, Name, Version, AppVersion string
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(v))
	if c.APIVersion != "v2" || c.Name != "pleg-exporter" || c.Version != version || c.AppVersion != version {
		t.Errorf("Chart.yaml %+v, VERSION %s", c, version)
	}
}

// The packaged chart (what a chart repository serves) renders what the
// directory does: .helmignore keeps the mixin's rules and the schema in.
func TestHelmPackage(t *testing.T) {
	dir := t.TempDir()
	if _, err := helm(t, "package", chart, "--destination", dir); err != nil {
		t.Fatal(err)
	}
	pkgs, _ := filepath.Glob(filepath.Join(dir, "pleg-exporter-*.tgz"))
	if len(pkgs) != 1 {
		t.Fatalf("helm package wrote %v", pkgs)
	}
	set := []string{"--set", "prometheusRule.enabled=true", "--set", "podMonitor.enabled=true"}
	fromDir, err := helm(t, append([]string{"template", "pleg-exporter", chart, "--namespace", "pleg-exporter"}, set...)...)
	if err != nil {
		t.Fatal(err)
	}
	fromPkg, err := helm(t, append([]string{"template", "pleg-exporter", pkgs[0], "--namespace", "pleg-exporter"}, set...)...)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fromDir, fromPkg) {
		t.Error("the packaged chart renders other objects than its directory")
	}
	if r := decodeObjects(t, fromPkg); r.rule == nil || len(r.rule.Spec.Groups) == 0 {
		t.Error("the packaged chart's PrometheusRule has no groups")
	}
	if _, err := helm(t, "template", "pleg-exporter", pkgs[0], "--set", "podMonitr.enabled=true"); err == nil {
		t.Error("the packaged chart accepts a typo: its values.schema.json is not in it")
	}
}
