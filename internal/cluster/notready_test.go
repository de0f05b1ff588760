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
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/gc"
	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// The kubelet's log lines.
const (
	logRelistFailed = "GenericPLEG: Unable to retrieve pods"
	logNotHealthy   = "PLEG is not healthy"
)

// overflow is the overflow in the cluster, timed where the SRE sees it:
// ListContainers past 16 MiB; the exporter's pod reports the answer over
// the limit; the kubelet's "PLEG is not healthy"; the API server's Node
// Ready=False with that message and the not-ready taint, while the
// exporter's pod (it tolerates every taint) stays Running and Ready. Then
// the runbook's own `kubectl exec … pleg_exporter gc` heals the node and it
// turns Ready.
func overflow(t *testing.T, ctx context.Context, c *Cluster, pod corev1.Pod, pages *pager) {
	url := podURL(pod)
	cc, err := c.Containerd.Dial(256 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	pc := &testenv.PodClient{RS: runtimeapi.NewRuntimeServiceClient(cc), LogDir: filepath.Join(c.Dir, "pod-logs")}
	start := time.Now()
	ids, pods, err := testenv.Flood(ctx, pc, kubecontainer.GRPCLimitBytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("flood: %d never-started containers with 64 KiB annotations in %d pods in %v", len(ids), len(pods), since(start))
	failed, ok := c.Kubelet.WaitLog(start, time.Minute, logRelistFailed, "ResourceExhausted")
	if !ok {
		t.Fatalf("the kubelet logged no failed relist within 1m of the flood:\n%s", c.Kubelet.LogTail(30))
	}
	tl := watchNotReady(t, ctx, c, pod, url, failed.At)
	if pg, ok := pages.firstPage("PLEGPayloadOverLimit"); ok {
		tl.paged, tl.pageLabels = pg.at, pg.labels
	}
	t.Logf("overflow timeline (T0 = the kubelet's first failed relist %s): %s", failed.At.Format("15:04:05.000"), tl)
	t.Logf("overflow: every page until NotReady: %v", pages.since(start, failed.At))
	if lead := tl.notReady.Sub(tl.over); lead < 120*time.Second {
		t.Errorf("the exporter's pod reported the answer over the limit %v before the Node turned NotReady, want at least 2m", lead.Round(100*time.Millisecond))
	}
	if lead := tl.notReady.Sub(tl.paged); tl.paged.IsZero() || lead < 120*time.Second {
		t.Errorf("PLEGPayloadOverLimit paged %v before the Node turned NotReady (at %v), want at least 2m", lead.Round(100*time.Millisecond), tl.paged)
	} else if tl.pageLabels["node"] != Node || tl.pageLabels["cluster"] != "pleg-test" {
		t.Errorf("the page's labels %v lack node=%s or the Prometheus' external label cluster=pleg-test", tl.pageLabels, Node)
	}
	heal(t, ctx, c, pod)
}

// timeline is the overflow as the test saw it, each time the first.
type timeline struct {
	t0, over, paged, notHealthy, notReady, tainted time.Time
	payload                                        float64
	cond                                           corev1.NodeCondition
	pageLabels                                     map[string]string
}

func (tl timeline) String() string {
	at := func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return fmt.Sprintf("T0%+.1fs", t.Sub(tl.t0).Seconds())
	}
	return fmt.Sprintf("the exporter's pod: ListContainers %.0f bytes over the limit %s; PLEGPayloadOverLimit at the webhook %s; kubelet %q %s; "+
		"Node Ready=False %s (lastTransitionTime %s, reason %s: %q); taint %s %s; lead time from the page %v",
		tl.payload, at(tl.over), at(tl.paged), logNotHealthy, at(tl.notHealthy), at(tl.notReady), tl.cond.LastTransitionTime.Format("15:04:05"),
		tl.cond.Reason, tl.cond.Message, corev1.TaintNodeNotReady, at(tl.tainted), tl.notReady.Sub(tl.paged).Round(100*time.Millisecond))
}

// watchNotReady polls the exporter's pod, the kubelet's log and the Node
// every second until the Node is NotReady and tainted, checking that the
// exporter's pod stays Ready throughout.
func watchNotReady(t *testing.T, ctx context.Context, c *Cluster, pod corev1.Pod, url string, t0 time.Time) timeline {
	t.Helper()
	tl := timeline{t0: t0}
	deadline := t0.Add(5 * time.Minute)
	for tl.notReady.IsZero() || tl.tainted.IsZero() {
		now := time.Now()
		if tl.over.IsZero() {
			if ms, err := testenv.ScrapeMetrics(url); err == nil {
				v, _ := testenv.Gauge(ms, "pleg_relist_payload_bytes", map[string]string{"rpc": "ListContainers"})
				if v > kubecontainer.GRPCLimitBytes {
					tl.over, tl.payload = now, v
				}
			}
		}
		if l, ok := c.Kubelet.FindLog(t0, logNotHealthy); ok && tl.notHealthy.IsZero() {
			tl.notHealthy = l.At
		}
		var node corev1.Node
		if err := c.Get(ctx, &node, "node", Node); err == nil {
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionFalse && tl.notReady.IsZero() {
					tl.notReady, tl.cond = now, cond
				}
			}
			for _, taint := range node.Spec.Taints {
				if taint.Key == corev1.TaintNodeNotReady && tl.tainted.IsZero() {
					tl.tainted = now
				}
			}
		}
		var p corev1.Pod
		if err := c.Get(ctx, &p, "pod", pod.Name, "--namespace", namespace); err == nil && !podReady(p) {
			t.Errorf("the exporter's pod is not Ready at T0%+.0fs: %s", now.Sub(t0).Seconds(), p.Status.Phase)
		}
		if now.After(deadline) {
			t.Fatalf("no NotReady Node within 5m of the first failed relist: %s\n%s", tl, c.Kubelet.LogTail(20))
		}
		time.Sleep(time.Second)
	}
	if !strings.Contains(tl.cond.Message, logNotHealthy) {
		t.Errorf("the Node's Ready condition says %q, want %q", tl.cond.Message, logNotHealthy)
	}
	return tl
}

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// heal runs the runbook's command in the exporter's pod: the gc dry run
// (JSON), then the command it recommends; the Node turns Ready again.
func heal(t *testing.T, ctx context.Context, c *Cluster, pod corev1.Pod) {
	t.Helper()
	endpoint := pod.Spec.Containers[0].Args[0] // --runtime.endpoint=unix:///host/...
	if !strings.HasPrefix(endpoint, "--runtime.endpoint=") {
		t.Fatalf("the pod's first argument is %q, want its --runtime.endpoint", endpoint)
	}
	exec := func(args ...string) (*gc.Report, error) {
		out, err := c.Kubectl(ctx, append([]string{"--namespace", namespace, "exec", pod.Name, "--", "/bin/pleg_exporter"}, args...)...)
		r := &gc.Report{}
		if jerr := json.Unmarshal(out, r); jerr != nil {
			return nil, fmt.Errorf("%v (%v): %s", err, jerr, out)
		}
		return r, nil
	}
	dry, err := exec("gc", endpoint, "--output=json")
	if err != nil {
		t.Fatalf("kubectl exec … pleg_exporter gc: %v", err)
	}
	args := strings.Fields(dry.Command)
	if dry.Recommended == "" || len(args) < 2 || args[1] != "gc" || !strings.Contains(dry.Command, "--apply") {
		t.Fatalf("gc dry run in the pod: recommended %q, command %q", dry.Recommended, dry.Command)
	}
	began := time.Now()
	r, err := exec(append(append(args[1:], "--output=json"), endpointIfMissing(args, endpoint)...)...)
	if err != nil {
		t.Fatalf("kubectl exec … %s: %v", dry.Command, err)
	}
	if r.Applied == nil || len(r.Applied.Failures) != 0 || r.Check == nil || !r.Check.Fits {
		t.Fatalf("%s in the pod: %+v, check %+v", dry.Command, r.Applied, r.Check)
	}
	t.Logf("heal: kubectl exec %s -- %s: removed %d containers and %d sandboxes in %v; the lists then answer %v bytes",
		pod.Name, dry.Command, r.Applied.Removed["container"], r.Applied.Removed["sandbox"], since(began), r.Check.Payload)
	if err := c.WaitNodeCondition(ctx, corev1.NodeReady, corev1.ConditionTrue, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("heal: the Node Ready again %v after gc began", since(began))
}

// endpointIfMissing is the endpoint argument unless the recommended command
// carries one already.
func endpointIfMissing(args []string, endpoint string) []string {
	for _, a := range args {
		if strings.HasPrefix(a, "--runtime.endpoint") {
			return nil
		}
	}
	return []string{endpoint}
}
