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
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/pleg-exporter/pleg_exporter/internal/stack"
	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
)

// underTest is the kubelet TestCluster runs. make test runs the pinned one
// (testenv.KubeletVersion) on Debian's containerd with the default gates;
// make test-kubelets (scripts/test-kubelets.sh) runs the versions the field
// runs, under the same control plane (a kubelet may be three minor versions
// older than its API server), with:
//
//	KUBELET                  the kubelet binary
//	PLEG_KUBELET_GATES       its feature gates: EventedPLEG=true,CRIListStreaming=true
//	PLEG_CLUSTER_CONTAINERD  a containerd build instead of Debian's 1.6:
//	                         testenv.Containerd17Version or Containerd2Version
//	PLEG_RECORD_KUBELET      write the run's recording (stack.Recording) to this file
//
// One run at a time: the package's tests share it (kubelet, recording).
var (
	kubelet   underTest
	recording = &stack.Recording{}
)

type underTest struct {
	version string // the kubelet's --version, e.g. v1.36.3
	minor   int
	gates   map[string]bool
	runtime testenv.ContainerdOptions
	record  string
}

var kubeletVersionRE = regexp.MustCompile(`^Kubernetes (v1\.(\d+)\.\d+\S*)$`)

// kubeletUnderTest reads the environment; an error names what is wrong.
func kubeletUnderTest() (underTest, error) {
	u := underTest{gates: map[string]bool{}, record: os.Getenv("PLEG_RECORD_KUBELET")}
	bin, err := testenv.KubeletBinary()
	if err != nil {
		return u, err
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return u, fmt.Errorf("%s --version: %v", bin, err)
	}
	m := kubeletVersionRE.FindStringSubmatch(strings.TrimSpace(string(out)))
	if m == nil {
		return u, fmt.Errorf("%s --version said %q, want Kubernetes v1.N.M", bin, strings.TrimSpace(string(out)))
	}
	u.version = m[1]
	u.minor, _ = strconv.Atoi(m[2])
	if g := os.Getenv("PLEG_KUBELET_GATES"); g != "" {
		for _, kv := range strings.Split(g, ",") {
			k, v, ok := strings.Cut(kv, "=")
			on, err := strconv.ParseBool(v)
			if !ok || err != nil || k == "" {
				return u, fmt.Errorf("PLEG_KUBELET_GATES=%q: want Gate=true|false[,...]", g)
			}
			u.gates[k] = on
		}
	}
	switch v := os.Getenv("PLEG_CLUSTER_CONTAINERD"); v {
	case "":
	case testenv.Containerd17Version:
		u.runtime.V1 = true
		u.runtime.Binaries, err = testenv.Containerd17Dir()
	case testenv.Containerd2Version:
		u.runtime.Binaries, err = testenv.Containerd2Dir()
	default:
		err = fmt.Errorf("PLEG_CLUSTER_CONTAINERD=%q: want %s or %s (or empty: Debian's)", v, testenv.Containerd17Version, testenv.Containerd2Version)
	}
	return u, err
}

// eventedGate: a kubelet v1.26-v1.36 with the EventedPLEG gate, whose
// evented health check sets kubelet_pleg_last_seen_seconds to the time of
// the check (the mixin's node:kubelet_pleg_evented_gate:bool).
func (u underTest) eventedGate() bool {
	return u.gates["EventedPLEG"] && u.minor >= 26 && u.minor <= 36
}

// eventedRelist: such a kubelet still relisting every 300 s with its 10 m
// threshold: fewer than 5 failed CRI event streams, after which it falls
// back to 1 s / 3 m (node:kubelet_pleg_evented_relist:bool).
func (u underTest) eventedRelist(t *testing.T, c *Cluster) bool {
	t.Helper()
	if !u.eventedGate() {
		return false
	}
	return u.streamErrors(t, c) < 5
}

// streamErrors is the kubelet's kubelet_evented_pleg_connection_error_count.
func (u underTest) streamErrors(t *testing.T, c *Cluster) float64 {
	t.Helper()
	ms, err := c.Kubelet.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	errs := 0.0
	for _, m := range ms["kubelet_evented_pleg_connection_error_count"].GetMetric() {
		errs += m.GetCounter().GetValue()
	}
	return errs
}

// backToEvented: a kubelet with the EventedPLEG gate that has fallen back
// to 1 s / 3 m (5 failed CRI event streams: one containerd restart does it)
// stays so until it restarts. To measure the evented mode itself, it is
// restarted here, as an SRE would after the runbook's section; what made it
// fall back is logged, the field fact.
func (u underTest) backToEvented(t *testing.T, ctx context.Context, c *Cluster, after string) {
	t.Helper()
	if !u.eventedGate() {
		return
	}
	errs := u.streamErrors(t, c)
	if errs < 5 {
		t.Logf("%s: %s: %v failed CRI event streams, still in the evented mode", after, u, errs)
		return
	}
	t.Logf("%s: %s: %v failed CRI event streams after %s: it relists every second with the 3m threshold until it restarts; restarting it",
		after, u, errs, after)
	if err := c.Kubelet.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitNodeCondition(ctx, corev1.NodeReady, corev1.ConditionTrue, 2*time.Minute); err != nil {
		t.Fatalf("the restarted kubelet's Node: %v\n%s", err, c.Kubelet.LogTail(30))
	}
	if errs := u.streamErrors(t, c); errs >= 5 {
		t.Fatalf("the restarted kubelet has %v failed CRI event streams already", errs)
	}
}

// threshold is the kubelet's PLEG threshold now.
func (u underTest) threshold(t *testing.T, c *Cluster) time.Duration {
	if u.eventedRelist(t, c) {
		return 10 * time.Minute
	}
	return 3 * time.Minute
}

func (u underTest) String() string {
	var gates []string
	for g, on := range u.gates {
		gates = append(gates, fmt.Sprintf("%s=%v", g, on))
	}
	sort.Strings(gates)
	rt := "Debian's containerd"
	if u.runtime.Binaries != "" {
		rt = "containerd " + strings.TrimPrefix(filepath.Base(u.runtime.Binaries), "containerd-")
	}
	return fmt.Sprintf("kubelet %s on %s, gates [%s]", u.version, rt, strings.Join(gates, " "))
}

// checkGates wants the kubelet's own kubernetes_build_info and
// kubernetes_feature_enabled to say what it was started with.
func (u underTest) checkGates(t *testing.T, c *Cluster) {
	t.Helper()
	ms, err := c.Kubelet.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := testenv.Gauge(ms, "kubernetes_build_info", map[string]string{"git_version": u.version}); !ok || v != 1 {
		t.Errorf("kubernetes_build_info{git_version=%q} = %v (exported %v)", u.version, v, ok)
	}
	for g, on := range u.gates {
		want := map[bool]float64{true: 1, false: 0}[on]
		if v, ok := testenv.Gauge(ms, "kubernetes_feature_enabled", map[string]string{"name": g}); !ok || v != want {
			t.Errorf("kubernetes_feature_enabled{name=%q} = %v (exported %v), want %v", g, v, ok, want)
		}
	}
}

// writeRecording writes the run's recording, when asked for one.
func (u underTest) writeRecording(t *testing.T, ctx context.Context, c *Cluster, rec *stack.Recording) {
	t.Helper()
	if u.record == "" {
		return
	}
	what, err := rec.Write(ctx, c.monitoring.API(), u.record, stack.RecordingFile{
		Name: fmt.Sprintf("recorded by TestCluster (make test-kubelets), %s", u),
		Header: []string{
			"Generated by make test-kubelets (TestCluster with PLEG_RECORD_KUBELET): the series the Prometheus",
			"Operator's Prometheus scraped from the exporter's pod and a real kubelet registered with a real",
			"control plane, through the freeze and the overflow, and the alerts it had firing at each check.",
			"make test replays it through the rendered mixin (mixin/recordings_test.go).",
		},
		RuleFiles: []string{"../../mixin/generated/prometheus_rules.yaml", "../../mixin/generated/prometheus_alerts.yaml"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %s into %s", what, u.record)
}
