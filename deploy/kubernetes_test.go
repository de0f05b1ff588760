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
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
	"github.com/pleg-exporter/pleg_exporter/mixin"
)

// Each overlay relists through the socket at endpoint, inside the pod; the
// host directory that holds it (and Docker's socket on cri-dockerd nodes) is
// the one hostPath mounted.
var overlays = map[string]struct{ endpoint, dir string }{
	"base":                 {"unix:///host/run/containerd/containerd.sock", "/run/containerd"},
	"overlays/containerd":  {"unix:///host/run/containerd/containerd.sock", "/run/containerd"},
	"overlays/crio":        {"unix:///host/var/run/crio/crio.sock", "/var/run/crio"},
	"overlays/cri-dockerd": {"unix:///host/var/run/cri-dockerd.sock", "/var/run"},
}

func render(t *testing.T, dir string) []byte {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join("kubernetes", dir))
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	out, err := res.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// strict decodes one object into its real API type, failing on any field
// the type does not have.
func strict(t *testing.T, doc []byte, into any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(doc, into); err != nil {
		t.Fatalf("%T: %v\n%s", into, err, doc)
	}
}

func TestKustomizeRendersTypedObjects(t *testing.T) {
	for dir, want := range overlays {
		t.Run(dir, func(t *testing.T) {
			out := render(t, dir)
			kinds := map[string]int{}
			var ds appsv1.DaemonSet
			var pm monitoringv1.PodMonitor
			var rule monitoringv1.PrometheusRule
			for _, doc := range bytes.Split(out, []byte("\n---\n")) {
				var meta struct{ Kind string }
				if err := yaml.Unmarshal(doc, &meta); err != nil {
					t.Fatal(err)
				}
				kinds[meta.Kind]++
				switch meta.Kind {
				case "Namespace":
					strict(t, doc, &corev1.Namespace{})
				case "ServiceAccount":
					strict(t, doc, &corev1.ServiceAccount{})
				case "Service":
					strict(t, doc, &corev1.Service{})
				case "DaemonSet":
					strict(t, doc, &ds)
				case "PodMonitor":
					strict(t, doc, &pm)
				case "PrometheusRule":
					strict(t, doc, &rule)
				default:
					t.Errorf("unexpected kind %q", meta.Kind)
				}
			}
			for _, k := range []string{"Namespace", "ServiceAccount", "DaemonSet", "Service", "PodMonitor", "PrometheusRule"} {
				if kinds[k] != 1 {
					t.Errorf("%d %s objects", kinds[k], k)
				}
			}
			checkDaemonSet(t, &ds, want.endpoint, want.dir, dir == "overlays/cri-dockerd")
			checkPodMonitor(t, &pm)
			checkRule(t, &rule)
		})
	}
}

func checkDaemonSet(t *testing.T, ds *appsv1.DaemonSet, endpoint, dir string, docker bool) {
	t.Helper()
	spec := ds.Spec.Template.Spec
	if len(spec.Tolerations) != 1 || spec.Tolerations[0].Operator != corev1.TolerationOpExists || spec.Tolerations[0].Key != "" {
		t.Errorf("tolerations %v: must tolerate every taint", spec.Tolerations)
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		t.Error("host namespaces requested")
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers", len(spec.Containers))
	}
	c := spec.Containers[0]
	args := strings.Join(c.Args, " ")
	if !strings.Contains(args, "--runtime.endpoint="+endpoint) {
		t.Errorf("args %q", args)
	}
	checkListenAddress(t, c)
	if docker != strings.Contains(args, "--docker.host=unix://") {
		t.Errorf("docker view in args %q", args)
	}
	sc := c.SecurityContext
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 0 ||
		(sc.Privileged != nil && *sc.Privileged) {
		t.Errorf("container securityContext %+v", sc)
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/-/healthy" || c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/-/ready" {
		t.Error("probes must use the exporter's own endpoints")
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %v", c.Resources)
	}
	checkSocketMounts(t, spec, c, dir)
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("service account token mounted")
	}
}

// checkSocketMounts: exactly one hostPath, the socket's directory, mounted
// read-only at /host plus its path, and every socket the args name inside
// it. A socket *file* mount would go stale when the runtime re-creates its
// socket on restart.
func checkSocketMounts(t *testing.T, spec corev1.PodSpec, c corev1.Container, dir string) {
	t.Helper()
	var hostPaths []corev1.Volume
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			hostPaths = append(hostPaths, v)
		}
	}
	if len(hostPaths) != 1 {
		t.Fatalf("%d hostPath volumes, want 1 (the socket directory)", len(hostPaths))
	}
	v := hostPaths[0]
	if typ := ptr.Deref(v.HostPath.Type, ""); v.HostPath.Path != dir || typ != corev1.HostPathDirectory {
		t.Errorf("hostPath %s (type %q), want the directory %s, type Directory", v.HostPath.Path, typ, dir)
	}
	var mount *corev1.VolumeMount
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].Name == v.Name {
			mount = &c.VolumeMounts[i]
		}
	}
	if mount == nil || !mount.ReadOnly || mount.MountPath != "/host"+dir || mount.SubPath != "" ||
		ptr.Deref(mount.MountPropagation, corev1.MountPropagationNone) != corev1.MountPropagationNone ||
		ptr.Deref(mount.RecursiveReadOnly, "") != corev1.RecursiveReadOnlyIfPossible {
		t.Fatalf("mount of %s: %+v, want read-only (recursively where possible) at /host%s without propagation", dir, mount, dir)
	}
	for _, a := range c.Args {
		for _, flag := range []string{"--runtime.endpoint=unix://", "--docker.host=unix://"} {
			if p, ok := strings.CutPrefix(a, flag); ok && filepath.Dir(p) != mount.MountPath {
				t.Errorf("%s: socket %s is not directly in the mounted directory %s", flag, p, mount.MountPath)
			}
		}
	}
}

// checkListenAddress expands $(POD_IP) as the kubelet does, for an IPv4 and
// an IPv6 pod, and requires an address the exporter can listen on.
func checkListenAddress(t *testing.T, c corev1.Container) {
	t.Helper()
	var tmpl string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--web.listen-address="); ok {
			tmpl = v
		}
	}
	if !strings.Contains(tmpl, "$(POD_IP)") {
		t.Fatalf("--web.listen-address=%q does not use the pod's address", tmpl)
	}
	for _, ip := range []string{"10.244.1.7", "fd00:10:244:1::7"} {
		addr := strings.ReplaceAll(tmpl, "$(POD_IP)", ip)
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host != ip || port != "10391" {
			t.Errorf("pod IP %s: --web.listen-address=%s: host %q port %q, %v", ip, addr, host, port, err)
		}
		if _, err := net.ResolveTCPAddr("tcp", addr); err != nil {
			t.Errorf("pod IP %s: %v", ip, err)
		}
	}
}

func checkPodMonitor(t *testing.T, pm *monitoringv1.PodMonitor) {
	t.Helper()
	if pm.Spec.JobLabel != "app.kubernetes.io/name" || len(pm.Spec.PodMetricsEndpoints) != 1 {
		t.Fatalf("podmonitor %+v", pm.Spec)
	}
	ep := pm.Spec.PodMetricsEndpoints[0]
	ok := false
	for _, r := range ep.RelabelConfigs {
		if len(r.SourceLabels) == 1 && r.SourceLabels[0] == "__meta_kubernetes_pod_node_name" && r.TargetLabel == "node" {
			ok = true
		}
	}
	if !ok {
		t.Error("PodMonitor does not relabel the node name into node")
	}
	// pleg_namespace_containers{namespace=...}: the namespace counted, not
	// the exporter pod's.
	if !ep.HonorLabels {
		t.Error("PodMonitor without honorLabels: the per-namespace series' namespace label would become exported_namespace")
	}
}

// The PrometheusRule carries exactly the mixin's groups.
func checkRule(t *testing.T, rule *monitoringv1.PrometheusRule) {
	t.Helper()
	files, err := mixin.Render(filepath.Join("..", "mixin"))
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		Groups []struct{ Name string } `json:"groups"`
	}
	n := 0
	for _, f := range []string{"mixin/generated/prometheus_rules.yaml", "mixin/generated/prometheus_alerts.yaml"} {
		if err := yaml.Unmarshal(files[f], &want); err != nil {
			t.Fatal(err)
		}
		for _, g := range want.Groups {
			if n >= len(rule.Spec.Groups) || rule.Spec.Groups[n].Name != g.Name {
				t.Errorf("PrometheusRule group %d is not the mixin's %s", n, g.Name)
			}
			n++
		}
	}
	if n != len(rule.Spec.Groups) {
		t.Errorf("PrometheusRule has %d groups, the mixin %d", len(rule.Spec.Groups), n)
	}
}

// kubectl's built-in kustomize renders the same objects, offline.
// kubectl kustomize renders every overlay to the same objects as the
// kustomize library the tests decode (field for field, in any order):
// users apply the overlays with kubectl, whose kustomize is its own build.
// $KUBECTL names the kubectl: make test passes the one of the pinned
// Kubernetes (testenv.KubeletVersion), built with the kubelet. In CI it must
// be that one; elsewhere a kubectl on the PATH will do, and none skips.
func TestKubectlKustomize(t *testing.T) {
	kubectl := pinnedKubectl(t)
	for dir := range overlays {
		out, err := exec.Command(kubectl, "kustomize", filepath.Join("kubernetes", dir)).Output()
		if err != nil {
			t.Fatalf("kubectl kustomize %s: %v", dir, err)
		}
		got, want := objects(t, out), objects(t, render(t, dir))
		if len(got) != len(want) {
			t.Errorf("%s: kubectl renders %d objects, the library %d", dir, len(got), len(want))
		}
		for key, w := range want {
			g, ok := got[key]
			switch {
			case !ok:
				t.Errorf("%s: kubectl does not render %s", dir, key)
			case !reflect.DeepEqual(g, w):
				gb, _ := yaml.Marshal(g)
				wb, _ := yaml.Marshal(w)
				t.Errorf("%s: %s differs:\nkubectl:\n%s\nlibrary:\n%s", dir, key, gb, wb)
			}
		}
	}
}

// objects decodes a rendered stream into its objects by kind, namespace
// and name.
func objects(t *testing.T, stream []byte) map[string]map[string]any {
	t.Helper()
	m := map[string]map[string]any{}
	for _, doc := range bytes.Split(stream, []byte("\n---\n")) {
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var o map[string]any
		if err := yaml.Unmarshal(doc, &o); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		md, _ := o["metadata"].(map[string]any)
		key := fmt.Sprintf("%v %v/%v", o["kind"], md["namespace"], md["name"])
		if _, dup := m[key]; dup {
			t.Errorf("%s rendered twice", key)
		}
		m[key] = o
	}
	return m
}

func TestSystemdUnit(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	unit, err := os.ReadFile("systemd/pleg_exporter.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes", "CapabilityBoundingSet=\n", "Restart=on-failure", "User=pleg_exporter"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("unit lacks %q", strings.TrimSpace(want))
		}
	}
	// verify needs ExecStart to exist: point it at a real binary.
	bin := buildExporter(t)
	path := filepath.Join(filepath.Dir(bin), "pleg_exporter.service")
	os.WriteFile(path, bytes.ReplaceAll(unit, []byte("/usr/local/bin/pleg_exporter"), []byte(bin)), 0o644)
	cmd := exec.Command(analyze, "verify", path)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), "pleg_exporter.service:") {
		if strings.Contains(string(out), "System has not been booted with systemd") {
			t.Skipf("systemd-analyze cannot run here: %s", out)
		}
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	t.Logf("systemd-analyze verify: ok %s", fmt.Sprint(strings.TrimSpace(string(out))))
}

// pinnedKubectl is $KUBECTL, checked to be the pinned version, or (outside
// CI) the PATH's kubectl.
func pinnedKubectl(t *testing.T) string {
	t.Helper()
	kubectl := os.Getenv("KUBECTL")
	if kubectl == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("$KUBECTL is not set: CI runs this test with the kubectl %s make test builds", testenv.KubeletVersion)
		}
		var err error
		if kubectl, err = exec.LookPath("kubectl"); err != nil {
			t.Skip("no $KUBECTL and no kubectl on the PATH; the krusty rendering above is kubectl's kustomize library")
		}
	}
	out, err := exec.Command(kubectl, "version", "--client").CombinedOutput()
	if err != nil {
		t.Fatalf("%s version --client: %v: %s", kubectl, err, out)
	}
	version := strings.Join(strings.Fields(string(out)), " ")
	t.Logf("%s: %s", kubectl, version)
	if os.Getenv("KUBECTL") != "" && !strings.Contains(version, "Client Version: "+testenv.KubeletVersion+" ") &&
		!strings.HasSuffix(version, "Client Version: "+testenv.KubeletVersion) {
		t.Fatalf("$KUBECTL is %q, not the pinned Kubernetes %s", version, testenv.KubeletVersion)
	}
	return kubectl
}
