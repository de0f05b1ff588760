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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/gc"
	"github.com/pleg-exporter/pleg_exporter/internal/stack"
	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// The kubelet's log lines.
const (
	logRelistFailed = "GenericPLEG: Unable to retrieve pods"
	logGCFailed     = "Container garbage collection failed"
	logNotHealthy   = "PLEG is not healthy"
	// The Node's Ready message when the runtime's status check has had no
	// answer for 30 s (runtimeState.runtimeErrors).
	logRuntimeDown = "container runtime is down"
)

// overflow is the overflow in the cluster, timed where the SRE sees it:
// ListContainers past 16 MiB; the exporter's pod reports the answer over
// the limit, and counts exactly, while the kubelet's counts and last-seen
// stay where its last relist left them and its relist-duration histogram
// looks healthy; the kubelet's failed container GC and "PLEG is not
// healthy"; the API server's Node Ready=False with that message and the
// not-ready taint, while the exporter's pod (it tolerates every taint)
// stays Running and Ready. Then the runbook's own `kubectl exec …
// pleg_exporter gc` heals the node and it turns Ready, the pods' own
// containers as the kubelet's GC would have left them.
//
// Every alert that paged since resolvedFrom must have resolved at the end.
func overflow(t *testing.T, ctx context.Context, c *Cluster, pod corev1.Pod, pages *pager, resolvedFrom time.Time) {
	cc, err := c.Containerd.Dial(256 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	rs := runtimeapi.NewRuntimeServiceClient(cc)
	pc := &testenv.PodClient{RS: rs, LogDir: filepath.Join(c.Dir, "pod-logs")}
	start := time.Now()
	ids, pods, err := testenv.Flood(ctx, pc, kubecontainer.GRPCLimitBytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("flood: %d never-started containers with 64 KiB annotations in %d pods in %v", len(ids), len(pods), since(start))
	// A kubelet in the evented mode relists every 300 s, and may fall
	// back to 1 s / 3 m at any failed CRI event stream: its mode counts
	// from its first failed relist.
	relistWait := time.Minute
	if kubelet.eventedGate() {
		relistWait = 6 * time.Minute
		t.Logf("overflow: %s: %v failed CRI event streams before the flood", kubelet, kubelet.streamErrors(t, c))
	}
	failed, ok := c.Kubelet.WaitLog(start, relistWait, logRelistFailed, "ResourceExhausted")
	if !ok {
		t.Fatalf("the kubelet logged no failed relist within %v of the flood:\n%s", relistWait, c.Kubelet.LogTail(30))
	}
	threshold := kubelet.threshold(t, c)
	if kubelet.eventedGate() {
		t.Logf("overflow: %s: first failed relist %v after the flood, %v failed CRI event streams: threshold %v",
			kubelet, failed.At.Sub(start).Round(100*time.Millisecond), kubelet.streamErrors(t, c), threshold)
	}
	k1, err := c.Kubelet.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	ex := &exactness{url: podURL(pod), rs: rs, deadline: failed.At.Add(3 * relistInterval)}
	tl := watchNotReady(t, ctx, c, pod, failed.At, threshold+2*time.Minute, logNotHealthy, func(now time.Time) { ex.tick(ctx, now) })
	if want := fmt.Sprintf("threshold is %v", threshold); !strings.Contains(tl.cond.Message, want) {
		// An evented kubelet may fall back to 3m while its relists fail.
		if !kubelet.eventedGate() || !strings.Contains(tl.cond.Message, "threshold is 3m0s") {
			t.Errorf("the Node's Ready condition says %q, want %q (%s)", tl.cond.Message, want, kubelet)
		}
		t.Logf("overflow: %s fell back to the generic relist during the overflow (%v failed CRI event streams): %q", kubelet, kubelet.streamErrors(t, c), tl.cond.Message)
	}
	ex.report(t, k1, threshold == 10*time.Minute)
	seen := kubeletFrozen(t, c, k1, failed.At)
	pg, paged := pages.firstPage("PLEGPayloadOverLimit", start)
	gcFailed, _ := c.Kubelet.FindLog(start, logGCFailed)
	t.Logf("overflow timeline (T0 = the kubelet's first failed relist %s): the exporter's pod: ListContainers %.0f bytes over the limit %s; "+
		"PLEGPayloadOverLimit at the webhook %s; the kubelet's %q %s; %s",
		failed.At.Format("15:04:05.000"), ex.payload, tl.at(ex.over), tl.at(pg.at), logGCFailed, tl.at(gcFailed.At), tl)
	t.Logf("overflow: every page until NotReady: %v", pages.since(start, failed.At))
	if gcFailed.At.IsZero() {
		t.Errorf("the kubelet logged no %q", logGCFailed)
	}
	if lead := tl.t1().Sub(ex.over); ex.over.IsZero() || lead < 120*time.Second {
		t.Errorf("the exporter's pod reported the answer over the limit %v before the Node turned NotReady, want at least 2m", lead.Round(100*time.Millisecond))
	}
	tl.checkPage(t, "PLEGPayloadOverLimit", pg, paged, 120*time.Second)
	recording.Check("overflow: paging, the Node NotReady", time.Now())
	// (A hung relist of the freeze before may still page PLEGRelistSlow as
	// it ends: the overflow's page is PLEGPayloadOverLimit.)
	anchor(t, ctx, c, tl, pg)
	heal(t, ctx, c, pod, rs, seen)
	resolved(t, ctx, c, pages, resolvedFrom)
	if path := os.Getenv("PLEG_TIMELINE"); path != "" {
		writeTimeline(t, ctx, c, pages, path, start, failed.At, tl.notHealthy)
	}
}

// relistInterval is the exporter's default --relist.interval, the chart's.
const relistInterval = 10 * time.Second

// exactness follows the exporter's pod through the overflow: when it first
// reports the answer over the limit, and whether its counts and payload
// bytes become the runtime's own (testenv.ExporterDiff) by the deadline.
type exactness struct {
	url      string
	rs       runtimeapi.RuntimeServiceClient
	deadline time.Time
	over     time.Time
	payload  float64
	exact    *testenv.View
	diff     []string
}

func (e *exactness) tick(ctx context.Context, now time.Time) {
	if e.exact != nil && !e.over.IsZero() || now.After(e.deadline.Add(time.Minute)) {
		return
	}
	ms, err := testenv.ScrapeMetrics(e.url)
	if err != nil {
		e.diff = []string{err.Error()}
		return
	}
	if v, _ := testenv.Gauge(ms, "pleg_relist_payload_bytes", map[string]string{"rpc": "ListContainers"}); v > kubecontainer.GRPCLimitBytes && e.over.IsZero() {
		e.over, e.payload = now, v
	}
	if e.exact != nil || now.After(e.deadline) {
		return
	}
	v, err := testenv.RuntimeView(ctx, e.rs)
	if err != nil {
		e.diff = []string{err.Error()}
		return
	}
	if e.diff = testenv.ExporterDiff(ms, v); len(e.diff) == 0 {
		e.exact = &v
	}
}

// report wants the exporter exact past the limit, where the kubelet, whose
// metrics k1 holds from its first failed relist, counts fewer; in the
// evented mode (a kubelet v1.26-v1.36 with EventedPLEG) its counts follow
// the runtime's container events, not its relists, and are the runtime's.
func (e *exactness) report(t *testing.T, k1 map[string]*dto.MetricFamily, evented bool) {
	t.Helper()
	if e.exact == nil {
		t.Errorf("the exporter's pod did not count as the runtime lists within %v of the first failed relist:\n%s", 3*relistInterval, strings.Join(e.diff, "\n"))
		return
	}
	frozen := testenv.Sum(testenv.ByLabel(k1, "kubelet_running_containers", "container_state"))
	t.Logf("overflow: the exporter's pod counts %d containers and %d bytes, the runtime's answer; the kubelet's kubelet_running_containers stays at %v",
		e.exact.Total, int(e.exact.ContainerBytes), frozen)
	if evented {
		if frozen != float64(e.exact.Total) {
			t.Errorf("%s: kubelet_running_containers sums to %v with %d containers in the runtime: the evented mode should count them from the runtime's events", kubelet, frozen, e.exact.Total)
		}
		return
	}
	if frozen >= float64(e.exact.Total) {
		t.Errorf("kubelet_running_containers sums to %v with %d containers in the runtime: it should be stuck below", frozen, e.exact.Total)
	}
}

// kubeletFrozen checks the kubelet's own signals while every relist fails
// (k1 from its first failure at t0): counts that do not move, a last-seen
// from before t0, a relist-duration histogram that looks healthy. It
// returns that last-seen.
func kubeletFrozen(t *testing.T, c *Cluster, k1 map[string]*dto.MetricFamily, t0 time.Time) float64 {
	t.Helper()
	k2, err := c.Kubelet.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	running := func(ms map[string]*dto.MetricFamily) float64 {
		return testenv.Sum(testenv.ByLabel(ms, "kubelet_running_containers", "container_state"))
	}
	if a, b := running(k1), running(k2); a != b {
		t.Errorf("kubelet_running_containers moved from %v to %v while every relist failed", a, b)
	}
	seen, _ := testenv.Gauge(k2, "kubelet_pleg_last_seen_seconds", nil)
	last := time.Unix(int64(seen), 0)
	if kubelet.eventedGate() {
		// Its evented health check sets the gauge to the time of the
		// check, after the generic one: it never ages.
		if age := time.Since(last); age > 30*time.Second {
			t.Errorf("%s: kubelet_pleg_last_seen_seconds is %v old while every relist fails; the evented health check should keep it at the time of the check", kubelet, age.Round(time.Second))
		} else {
			t.Logf("overflow: %s: kubelet_pleg_last_seen_seconds %v old at NotReady: the evented health check keeps it fresh, the gauge does not age", kubelet, age.Round(time.Second))
		}
	} else if !last.Before(t0.Truncate(time.Second).Add(time.Second)) {
		// The gauge is set when the kubelet's health check runs, not by
		// the relist, so it may still catch up with the last good relist
		// after the first failure; it must never pass the first failure.
		t.Errorf("kubelet_pleg_last_seen_seconds says %s, after the first failed relist at %s", last.Format("15:04:05"), t0.Format("15:04:05.000"))
	}
	c1, s1, b1 := testenv.Histogram(k1, "kubelet_pleg_relist_duration_seconds", 1)
	c2, s2, b2 := testenv.Histogram(k2, "kubelet_pleg_relist_duration_seconds", 1)
	n, mean := c2-c1, (s2-s1)/(c2-c1)
	t.Logf("overflow: the kubelet relisted %v times between its first failure and NotReady, all failed; kubelet_pleg_relist_duration_seconds saw a mean of %.0f ms, %v of them under 1 s: the histogram looks healthy",
		n, mean*1000, b2-b1)
	// Every second, or every 300 s in the evented mode: from the first
	// failure to 10 m after the last success.
	least := 60.0
	if kubelet.eventedRelist(t, c) {
		least = 1
	}
	if n < least || b2-b1 < 0.95*n || mean > 0.5 {
		t.Errorf("kubelet_pleg_relist_duration_seconds: %v relists, %v under 1 s, mean %.3f s: want the failed relists fast (95%% under 1 s, mean under 0.5 s), at least %v", n, b2-b1, mean, least)
	}
	return seen
}

// freezeLead is the lead the freeze's page must have: the arithmetic's
// worst case (a page 60 s after the freeze, NotReady 120 s after it) less
// 5 s for Prometheus' and Alertmanager's own work and T1's whole seconds.
const freezeLead = 55 * time.Second

// frozen is the freeze in the cluster: containerd stopped with SIGSTOP (the
// exporter's pod, in its own shim, runs on). A registered kubelet does not
// wait for its PLEG threshold here: its node status update hangs in the
// runtime's Version call until its 2m runtime request timeout and then
// reports "container runtime is down" (no answer to its runtime status
// check for over 30 s), so the API server records the Node NotReady about
// 2 minutes after the freeze. PLEGRuntimeHung pages from the age of the
// hung list call; with 15 s scrape and evaluation intervals, a 15 s
// threshold and the exporter's list starting within its 10 s interval, it
// reaches the webhook 20-60 s after the freeze: about 60 s before
// NotReady at worst (freezeLead), not 90 s (the bar a 3-minute threshold
// would allow). Then
// SIGCONT and the Node Ready again; its alerts resolve during the overflow.
func frozen(t *testing.T, ctx context.Context, c *Cluster, pod corev1.Pod, pages *pager) {
	k, err := c.Kubelet.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	seen, _ := testenv.Gauge(k, "kubelet_pleg_last_seen_seconds", nil)
	t0 := time.Now()
	if err := c.Containerd.Freeze(); err != nil {
		t.Fatal(err)
	}
	thawed := false
	defer func() {
		if !thawed {
			c.Containerd.Thaw()
		}
	}()
	tl := watchNotReady(t, ctx, c, pod, t0, 5*time.Minute, logRuntimeDown, nil)
	pg, paged := pages.firstPage("PLEG", t0)
	t.Logf("freeze timeline (T0 = SIGSTOP %s; the kubelet's last relist T0%+.1fs): first page %s at the webhook %s; %s",
		t0.Format("15:04:05.000"), time.Unix(int64(seen), 0).Sub(t0).Seconds(), pg.labels["alertname"], tl.at(pg.at), tl)
	t.Logf("freeze: every page until NotReady: %v", pages.since(t0, t0))
	tl.checkPage(t, "the first PLEG alert", pg, paged, freezeLead)
	hung, hungPaged := pages.firstPage("PLEGRuntimeHung", t0)
	tl.checkPage(t, "PLEGRuntimeHung", hung, hungPaged, freezeLead)
	anchor(t, ctx, c, tl, pg)
	recording.Check("freeze: paging, the Node NotReady", time.Now())
	if err := c.Containerd.Thaw(); err != nil {
		t.Fatal(err)
	}
	thawed = true
	t1 := time.Now()
	if err := c.WaitNodeCondition(ctx, corev1.NodeReady, corev1.ConditionTrue, 3*time.Minute); err != nil {
		t.Fatalf("after SIGCONT: %v\n%s", err, c.Kubelet.LogTail(20))
	}
	t.Logf("freeze: the Node Ready again %v after SIGCONT", since(t1))
	// The node lifecycle controller marked the node's pods not ready; the
	// kubelet puts the exporter's back.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		var p corev1.Pod
		if err := c.Get(ctx, &p, "pod", pod.Name, "--namespace", namespace); err == nil && podReady(p) {
			t.Logf("freeze: the exporter's pod Ready again %v after SIGCONT", since(t1))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the exporter's pod not Ready 1m after SIGCONT")
		}
	}
	// Its alerts resolve while the overflow begins (PLEGRuntimeHung holds
	// 2 minutes after the lists answer; nothing in the overflow fires it):
	// the overflow's own check covers them.
}

// resolved waits until every alert that paged since from has been sent
// resolved and Prometheus has no PLEG alert pending or firing.
func resolved(t *testing.T, ctx context.Context, c *Cluster, pages *pager, from time.Time) {
	t.Helper()
	t0 := time.Now()
	for deadline := t0.Add(5 * time.Minute); ; time.Sleep(time.Second) {
		open := pages.unresolved(from)
		// PLEGThresholdMismatch (for: 1h) may be pending: a kubelet with
		// EventedPLEG that fell back to 1 s / 3 m no longer runs the
		// chart's plegThreshold=10m. It must not fire.
		active, err := c.monitoring.API().Query(ctx, `ALERTS{alertname=~"PLEG.*"} unless ALERTS{alertname="PLEGThresholdMismatch", alertstate="pending"}`)
		if len(open) == 0 && err == nil && len(active) == 0 {
			t.Logf("every alert resolved %v later, the webhook told of each", since(t0))
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			names := make([]string, 0, len(active))
			for _, a := range active {
				names = append(names, a.Metric["alertname"]+"/"+a.Metric["alertstate"])
			}
			t.Fatalf("5m on: the webhook has no resolved notification for %v; Prometheus has %v active (%v)", open, names, err)
		}
	}
}

// timeline is a fault as the kubelet and the API server showed it, each
// time the first seen.
type timeline struct {
	t0, notHealthy, notReady, tainted time.Time
	cond                              corev1.NodeCondition
}

// t1 is when the API server records the Node's Ready condition turning
// False: its lastTransitionTime (whole seconds, so a lead time measured to
// it is short by under a second, never long).
func (tl timeline) t1() time.Time { return tl.cond.LastTransitionTime.Time }

func (tl timeline) at(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return fmt.Sprintf("T0%+.1fs", t.Sub(tl.t0).Seconds())
}

func (tl timeline) String() string {
	return fmt.Sprintf("kubelet %q %s; Node Ready=False seen %s (T1: lastTransitionTime %s = %s, reason %s: %q); taint %s %s",
		logNotHealthy, tl.at(tl.notHealthy), tl.at(tl.notReady), tl.t1().Format("15:04:05"), tl.at(tl.t1()),
		tl.cond.Reason, tl.cond.Message, corev1.TaintNodeNotReady, tl.at(tl.tainted))
}

// checkPage wants the page at least lead before T1, from this node and
// with the Prometheus' cluster label.
func (tl timeline) checkPage(t *testing.T, what string, pg page, paged bool, lead time.Duration) {
	t.Helper()
	got := tl.t1().Sub(pg.at)
	switch {
	case !paged:
		t.Errorf("%s never paged before the Node turned NotReady", what)
	case got < lead:
		t.Errorf("%s paged %v before T1, the Node's NotReady, want at least %v", what, got.Round(100*time.Millisecond), lead)
	case pg.labels["node"] != Node || pg.labels["cluster"] != "pleg-test":
		t.Errorf("the page's labels %v lack node=%s or the Prometheus' external label cluster=pleg-test", pg.labels, Node)
	default:
		t.Logf("%s (%s) paged %v before T1", what, pg.labels["alertname"], got.Round(100*time.Millisecond))
	}
}

// watchNotReady polls the kubelet's log and the Node every second (and
// calls tick, when there is one) until the Node is NotReady, for the reason
// want, and tainted, checking that the exporter's pod stays Ready
// throughout.
func watchNotReady(t *testing.T, ctx context.Context, c *Cluster, pod corev1.Pod, t0 time.Time, within time.Duration, want string, tick func(time.Time)) timeline {
	t.Helper()
	tl := timeline{t0: t0}
	deadline := t0.Add(within)
	for tl.notReady.IsZero() || tl.tainted.IsZero() {
		now := time.Now()
		if tick != nil {
			tick(now)
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
		if err := c.Get(ctx, &p, "pod", pod.Name, "--namespace", namespace); err == nil && !podReady(p) && tl.notReady.IsZero() {
			t.Errorf("the exporter's pod is not Ready at T0%+.0fs: %s", now.Sub(t0).Seconds(), p.Status.Phase)
		}
		if now.After(deadline) {
			t.Fatalf("no NotReady Node within %v of T0: %s\n%s", within, tl, c.Kubelet.LogTail(20))
		}
		time.Sleep(time.Second)
	}
	if !strings.Contains(tl.cond.Message, want) {
		t.Errorf("the Node's Ready condition says %q, want %q", tl.cond.Message, want)
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
// (JSON), then the command it recommends; the kubelet relists again (its
// last-seen past frozenSeen), the Node turns Ready, and the cluster's own
// pods are as the kubelet's GC would have left them.
func heal(t *testing.T, ctx context.Context, c *Cluster, pod corev1.Pod, rs runtimeapi.RuntimeServiceClient, frozenSeen float64) {
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
	// The pods of the cluster, not the flood's.
	ours := func(md *runtimeapi.PodSandboxMetadata) bool { return md.GetNamespace() != testenv.FloodNamespace }
	before, err := testenv.PodItems(ctx, rs, ours)
	if err != nil {
		t.Fatal(err)
	}
	dry, err := exec("gc", endpoint, "--output=json")
	if err != nil {
		t.Fatalf("kubectl exec … pleg_exporter gc: %v", err)
	}
	args := strings.Fields(dry.Command)
	if dry.Recommended == "" || len(args) < 2 || args[1] != "gc" || !strings.Contains(dry.Command, "--apply") {
		t.Fatalf("gc dry run in the pod: recommended %q, command %q", dry.Recommended, dry.Command)
	}
	t.Logf("gc dry run in the pod: ListContainers %d bytes; the kubelet's policy removes %d items (→ %d bytes), --finished-pods %d (→ %d bytes); recommends %q: %s",
		dry.Before["ListContainers"], len(dry.Plans["kubelet"].Actions), dry.Plans["kubelet"].After["ListContainers"],
		len(dry.Plans["finished-pods"].Actions), dry.Plans["finished-pods"].After["ListContainers"], dry.Command, dry.Why)
	began := time.Now()
	r, err := exec(append(append(args[1:], "--output=json"), endpointIfMissing(args, endpoint)...)...)
	if err != nil {
		t.Fatalf("kubectl exec … %s: %v", dry.Command, err)
	}
	if r.Applied == nil || len(r.Applied.Failures) != 0 || r.Check == nil || !r.Check.Fits {
		t.Fatalf("%s in the pod: %+v, check %+v", dry.Command, r.Applied, r.Check)
	}
	t.Logf("heal: kubectl exec %s -- %s: removed %d containers and %d sandboxes (%d already gone) in %v; the lists then answer %v bytes",
		pod.Name, dry.Command, r.Applied.Removed["container"], r.Applied.Removed["sandbox"], r.Applied.Gone, since(began), r.Check.Payload)
	// What gc left, before the kubelet acts again: once its lists fit, its
	// own GC also removes the containers of pods deleted from the API
	// server, which gc cannot know of (an evented kubelet relists up to
	// 300 s later, time enough for that).
	after, err := testenv.PodItems(ctx, rs, ours)
	if err != nil {
		t.Fatal(err)
	}
	if kubelet.eventedGate() {
		// Its gauge is the time of its health check, not of a relist: the
		// Node's Ready is the sign of a relist, the next within 300 s in
		// the evented mode.
		if err := c.WaitNodeCondition(ctx, corev1.NodeReady, corev1.ConditionTrue, 7*time.Minute); err != nil {
			t.Fatal(err)
		}
		t.Logf("heal: %s: the Node Ready again %v after gc began", kubelet, since(began))
	} else {
		relisted := waitRelisted(t, c, frozenSeen)
		if err := c.WaitNodeCondition(ctx, corev1.NodeReady, corev1.ConditionTrue, 2*time.Minute); err != nil {
			t.Fatal(err)
		}
		t.Logf("heal: the kubelet relisted again %v and the Node was Ready again %v after gc began", relisted.Sub(began).Round(100*time.Millisecond), since(began))
	}
	planned := map[string]bool{}
	for _, a := range dry.Plans[dry.Recommended].Actions {
		planned[a.ID] = true
	}
	kept, went, breaches := testenv.CompareItems(before, after, planned)
	for _, b := range breaches {
		t.Errorf("the cluster's pods across gc: %s", b)
	}
	t.Logf("gc: the cluster's pods' %d running containers, ready sandboxes and newest containers are as they were; planned and removed as the kubelet's GC would: %v",
		kept, went)
}

// waitRelisted waits up to 60 s for the kubelet's last-seen to pass seen,
// and returns when it did.
func waitRelisted(t *testing.T, c *Cluster, seen float64) time.Time {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(250 * time.Millisecond) {
		if k, err := c.Kubelet.Metrics(); err == nil {
			if s, _ := testenv.Gauge(k, "kubelet_pleg_last_seen_seconds", nil); s > seen {
				return time.Now()
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kubelet did not relist within 60 s of gc's end:\n%s", c.Kubelet.LogTail(20))
		}
	}
}

// writeTimeline records the overflow's series, its first page of each PLEG
// alert and "PLEG is not healthy" for make plot-overflow
// (docs/overflow.png).
func writeTimeline(t *testing.T, ctx context.Context, c *Cluster, pages *pager, path string, start, t0, notHealthy time.Time) {
	tl := &stack.Timeline{What: fmt.Sprintf("the overflow past 16 MiB in a cluster under the kubelet %s (internal/cluster)", testenv.KubeletVersion),
		T0: t0, NotHealthy: notHealthy.Sub(t0).Seconds(), Alerts: map[string]float64{}}
	if err := c.monitoring.API().RecordTimeline(ctx, tl, start.Add(-30*time.Second), time.Now(), 5*time.Second); err != nil {
		t.Errorf("timeline: %v", err)
		return
	}
	for name, at := range pages.firsts("PLEG", start) {
		tl.Alerts[name] = at.Sub(t0).Seconds()
	}
	if err := stack.WriteTimeline(path, tl); err != nil {
		t.Errorf("timeline: %v", err)
		return
	}
	t.Logf("overflow: timeline of %d series and %d alerts written to %s", len(tl.Series), len(tl.Alerts), path)
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
