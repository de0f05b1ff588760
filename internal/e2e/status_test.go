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

package e2e

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/internal/criproxy"
	"github.com/pleg-exporter/pleg_exporter/internal/stack"
	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
)

// The kubelet's log line when a sandbox's status call fails in its relist
// (GetPodStatus in kuberuntime_manager.go).
const logSandboxStatusFailed = "PodSandboxStatus of sandbox for pod"

// The churn of step 3.
const (
	churnPods     = 50
	churnFor      = time.Minute
	churnDelay    = 20 * time.Millisecond // every ContainerStatus
	churnMeasured = 10 * time.Second      // the window starts this long after the churn
)

// The status pass under the real kubelet, both behind a CRI proxy that holds
// the status call of chosen sandboxes until its caller's deadline, as a
// runtime does on a broken sandbox:
//
//  1. One stuck sandbox: its pod's container exits; the kubelet's relist
//     inspects the pod and waits out PodSandboxStatus's 2-minute deadline,
//     then again in every relist (the pod is reinspected); its PLEG age
//     climbs to 2 minutes and back each time. The exporter's status pass
//     makes the same calls and its pleg_last_seen_seconds follows.
//  2. A second stuck sandbox, changed while the first relist hangs: the next
//     relist waits out both (4 minutes) and the kubelet says "PLEG is not
//     healthy". The first alert must reach the webhook at least 90 s before;
//     pleg_exporter diagnose names both pods and the call.
//  4. The held calls are released: both relist again, every alert resolves.
//  3. (after 4, beside the alerts' resolution: nothing is held any more)
//     50 pods change every second for a minute with every ContainerStatus
//     20 ms slow: the kubelet's mean relist and the exporter's mean list +
//     status pass agree within a factor of two, and the near-threshold
//     alert stays quiet.
func TestStatusPass(t *testing.T) {
	if err := stack.Check(); err != nil {
		unavailable(t, err)
	}
	kubeletBin, err := testenv.KubeletBinary()
	if err != nil {
		unavailable(t, err)
	}
	rec := &receiver{}
	hook := httptest.NewServer(rec) // loopback only
	defer hook.Close()
	dir, err := os.MkdirTemp("", "pleg-e2e-status")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	t0 := time.Now()
	bin := buildExporter(t)
	st, err := stack.Start(stack.Options{
		Dir: dir, ExporterBinary: bin, RulesDir: filepath.Join(repo, "mixin", "generated"),
		ReceiverURL: hook.URL, Log: testLog{t}, RelistInterval: relistInterval.String(),
		Kubelet: kubeletBin, MinContainerTTL: 24 * time.Hour, CRIProxy: true,
	})
	if err != nil {
		if errors.Is(err, testenv.ErrUnavailable) {
			unavailable(t, err)
		}
		t.Fatal(err)
	}
	defer st.Stop()
	defer func() {
		if t.Failed() {
			t.Logf("kubelet log tail:\n%s", st.Kubelet.LogTail(40))
			b, _ := os.ReadFile(filepath.Join(dir, "pleg_exporter.log"))
			t.Logf("exporter log tail:\n%s", tail(string(b), 40))
		}
	}()
	ctx, rs := runtimeClient(t, st) // containerd itself, past the proxy
	sandboxes, err := startStatusPods(ctx, st, rs)
	if err != nil {
		t.Fatal(err)
	}
	if err := waitQuiet(ctx, st, 5*time.Minute); err != nil {
		t.Fatalf("before the first hold: %v", err)
	}
	// The exporter inspects the pods that changed over its whole interval,
	// the kubelet those of the last second: a pod that came up a few
	// seconds before a hold begins would still be in the exporter's next
	// pass and not in the kubelet's. Start from a node where both are idle.
	if err := waitStatusIdle(ctx, st, 3*time.Minute); err != nil {
		t.Fatalf("before the first hold: %v", err)
	}
	t.Logf("status: stack with kubelet %s behind the CRI proxy and %d static pods up in %s", testenv.KubeletVersion, len(sandboxes), time.Since(t0).Round(time.Second))

	smp := &sampler{st: st}
	sampled := make(chan struct{})
	sctx, stopSampling := context.WithCancel(ctx)
	go func() { smp.run(sctx, 2*time.Second); close(sampled) }()
	defer func() { stopSampling(); <-sampled }()

	a, b := sandboxes["stuck-a"], sandboxes["stuck-b"]
	var released bool
	releaseA := st.Proxy.Hold(criproxy.PodSandboxStatus, a.GetId())
	releaseB := func() {}
	defer func() {
		if !released {
			releaseA()
			releaseB()
		}
	}()

	// 1. One stuck sandbox: its container exits.
	start := time.Now()
	at := func(tm time.Time) string { return fmt.Sprintf("+%s", tm.Sub(start).Round(100*time.Millisecond)) }
	if err := killApp(ctx, rs, a); err != nil {
		t.Fatal(err)
	}
	// 2. A second stuck sandbox, changed while the kubelet's first relist
	// waits on the first one (it lists no more until that ends), so that
	// its next relist waits on both. Step 1's second deadline is in that
	// relist.
	select {
	case <-time.After(time.Until(start.Add(time.Minute))):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	if l, ok := st.Kubelet.FindLog(start, logSandboxStatusFailed, a.GetId()); ok {
		t.Fatalf("the kubelet's status call of the stuck sandbox ended within a minute: %s", l.Text)
	}
	releaseB = st.Proxy.Hold(criproxy.PodSandboxStatus, b.GetId())
	changedB := time.Now()
	if err := killApp(ctx, rs, b); err != nil {
		t.Fatal(err)
	}
	// diagnose runs beside the wait, against the proxy, as a person on
	// the node would run it.
	type diagnosis struct {
		out  string
		err  error
		took time.Duration
	}
	diag := make(chan diagnosis, 1)
	go func() {
		t1 := time.Now()
		dctx, cancel := context.WithTimeout(ctx, 6*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(dctx, bin, "diagnose", "--runtime=cri", "--runtime.endpoint="+st.Proxy.Endpoint(), "--docker.host=none").CombinedOutput()
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 1 {
			err = nil // at risk: what it should say
		}
		diag <- diagnosis{string(out), err, time.Since(t1)}
	}()

	first, ok := st.Kubelet.WaitLog(start, plegThreshold, logSandboxStatusFailed, a.GetId())
	if !ok {
		t.Fatalf("the kubelet logged no %q for %s within 3m of its container's exit", logSandboxStatusFailed, a.GetMetadata().GetName())
	}
	t.Logf("status: the kubelet: %s", clip(first.Text, 400))
	if !strings.Contains(first.Text, "DeadlineExceeded") {
		t.Errorf("the kubelet's failed PodSandboxStatus was not a DeadlineExceeded")
	}
	notHealthy, ok := st.Kubelet.WaitLog(changedB, 2*plegThreshold+time.Minute, logNotHealthy)
	if !ok {
		// What the kubelet's relists did meanwhile: when each stuck
		// sandbox's status call hit its deadline.
		var seen []string
		for name, sb := range map[string]*runtimeapi.PodSandbox{"stuck-a": a, "stuck-b": b} {
			for _, l := range failedStatusLines(st.Kubelet, start)[sb.GetId()] {
				seen = append(seen, fmt.Sprintf("%s %s", name, l.At.Format("15:04:05")))
			}
		}
		sort.Strings(seen)
		t.Fatalf("the kubelet did not report %q within 7m of the second stuck sandbox (changed %s); its status deadlines: %v",
			logNotHealthy, changedB.Format("15:04:05"), seen)
	}
	t.Logf("status: the kubelet: %s", clip(notHealthy.Text, 300))
	var d diagnosis
	select {
	case d = <-diag:
	case <-time.After(2 * time.Minute):
		t.Errorf("pleg_exporter diagnose had not finished 2m after the kubelet's %q", logNotHealthy)
	}

	// 4. Release: both relist again.
	releaseA()
	releaseB()
	released = true
	releasedAt := time.Now()
	kubeletBack, exporterBack := waitRecovered(t, ctx, smp, releasedAt)
	failures := failedStatusLines(st.Kubelet, start)

	// What the kubelet and the exporter did while sandboxes were stuck.
	samples := smp.since(start)
	for _, s := range []struct {
		name string
		sb   *runtimeapi.PodSandbox
	}{{"stuck-a", a}, {"stuck-b", b}} {
		var ts []string
		for _, l := range failures[s.sb.GetId()] {
			ts = append(ts, at(l.At))
		}
		t.Logf("status: kubelet PodSandboxStatus DeadlineExceeded for %s at %s", s.name, strings.Join(ts, ", "))
	}
	if n := len(failures[a.GetId()]) + len(failures[b.GetId()]); n < 2 {
		t.Errorf("the kubelet logged %d failed PodSandboxStatus calls of the stuck sandboxes, want at least 2", n)
	}
	for i, gap := range deadlineGaps(failures) {
		if gap < plegThreshold*2/3-10*time.Second || gap > plegThreshold*2/3+20*time.Second {
			t.Errorf("deadline %d came %s after the one before, want ~2m (the kubelet's runtime request timeout)", i+2, gap)
		}
	}
	t.Logf("status: the kubelet's long relists (finished, from +0 to release+30s): %s", kubeletRelists(samples, start, releasedAt.Add(30*time.Second)))
	t.Logf("status: ages every 10 s (time() - kubelet_pleg_last_seen_seconds, pleg_last_seen_seconds):\n%s", series(samples, start, releasedAt.Add(30*time.Second), 10*time.Second))
	peakK, peakE, step1K, step1E := peaks(samples, first.At, notHealthy.At)
	t.Logf("status: the kubelet's PLEG age (time() - kubelet_pleg_last_seen_seconds) peaked at %.0f s in the one-sandbox cycle and %.0f s in all; the exporter's pleg_last_seen_seconds at %.0f s and %.0f s",
		step1K, peakK, step1E, peakE)
	if step1K < 100 || step1E < 100 {
		t.Errorf("with one stuck sandbox the ages reached %.0f s (kubelet) and %.0f s (exporter), want both ~120 s", step1K, step1E)
	}
	tr := tracking(samples, start, releasedAt.Add(30*time.Second))
	t.Logf("status: last seen tracking over %d samples every 2 s from +0 to release+30s: within a cycle the exporter's age differs from the kubelet's by at most %.1f s (mean %.1f s); after each of the kubelet's %d resets the exporter's followed within %s (max)",
		tr.n, tr.maxDiff, tr.meanDiff, tr.resets, tr.maxLag.Round(100*time.Millisecond))
	// The exporter's relist that first sees a change starts up to one
	// interval after the kubelet's; while a reinspected pod fails, both
	// relist a second after each pass, so the offset stays.
	limit := relistInterval.Seconds() + 3
	if tr.maxDiff > limit || tr.maxLag.Seconds() > limit {
		t.Errorf("pleg_last_seen_seconds strays from the kubelet's age by %.1f s within a cycle and %s at a reset: want within one exporter interval + 3 s (%.0f s)", tr.maxDiff, tr.maxLag, limit)
	}
	inflight, reinspect := maxOf(samples, func(s statusSample) float64 { return s.inFlight }), maxOf(samples, func(s statusSample) float64 { return s.reinspect })
	t.Logf("status: the exporter: pleg_relist_status_in_flight_seconds peaked at %.0f s (%s), pleg_relist_reinspect_pods at %.0f", inflight, smp.inFlightRPC(), reinspect)
	if inflight < 100 {
		t.Errorf("pleg_relist_status_in_flight_seconds peaked at %.0f s, want the hung call's ~120 s", inflight)
	}

	// The alerts: the first one at the webhook, and each alert's first
	// firing, against the kubelet's PLEG is not healthy.
	firstAlert, fromExporter, alerted := firstAlerts(rec, start)
	t.Logf("status: alerts after the first stuck sandbox: %s", alertTimeline(rec, start, at))
	if !alerted {
		t.Errorf("no PLEG alert reached the webhook before the kubelet's %q", logNotHealthy)
	} else {
		t.Logf("status timeline (+0 = the first stuck sandbox's container killed %s): first deadline %s; second sandbox changed %s; first alert %s at the webhook %s; first exporter alert %s %s; PLEG is not healthy %s; lead time %s; released %s",
			start.Format("15:04:05.000"), at(first.At), at(changedB), alertName(firstAlert), at(firstAlert.at), alertName(fromExporter), at(fromExporter.at),
			at(notHealthy.At), notHealthy.At.Sub(fromExporter.at).Round(100*time.Millisecond), at(releasedAt))
		if lead := notHealthy.At.Sub(fromExporter.at); fromExporter.at.IsZero() || lead < 90*time.Second {
			t.Errorf("the exporter's first alert came %s before the kubelet's PLEG is not healthy, want at least 90s", lead)
		}
	}
	if hanging, ok := rec.find(start, plegAlert("PLEGStatusCallHanging")); !ok || hanging.at.After(notHealthy.At) {
		t.Errorf("PLEGStatusCallHanging did not reach the webhook before the kubelet's %q", logNotHealthy)
	} else {
		t.Logf("status: PLEGStatusCallHanging at the webhook %s, %s before PLEG is not healthy and %s before the first deadline",
			at(hanging.at), notHealthy.At.Sub(hanging.at).Round(100*time.Millisecond), first.At.Sub(hanging.at).Round(100*time.Millisecond))
	}
	checkDiagnosis(t, d.out, d.err, d.took, "stuck-a", "stuck-b")
	t.Logf("status: after release the kubelet relisted in %s and the exporter's pleg_last_seen_seconds was back under %s in %s",
		kubeletBack.Round(100*time.Millisecond), relistInterval+2*time.Second, exporterBack.Round(100*time.Millisecond))

	// 3. Churn (nothing held): then every alert resolves.
	statusChurn(t, ctx, st, rs, sandboxes)
	if err := waitQuiet(ctx, st, 5*time.Minute); err != nil {
		t.Errorf("after release and churn: %v", err)
	} else {
		t.Logf("status: every alert resolved %s after release", time.Since(releasedAt).Round(time.Second))
	}
	t.Logf("status: proxy calls: %v", st.Proxy.CallCounts())
}

// startStatusPods runs the static pods of the test: the two that get stuck
// and the churn's, each one sleeping container, and returns their sandboxes
// by pod name (without the node suffix).
func startStatusPods(ctx context.Context, st *stack.Stack, rs runtimeapi.RuntimeServiceClient) (map[string]*runtimeapi.PodSandbox, error) {
	grace := int64(1)
	pod := func(name, ns string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.PodSpec{
			HostNetwork: true, TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "app", Image: testenv.Image, Command: []string{"/bin/sleep", "100000"}}},
		}}
	}
	pods := []*corev1.Pod{pod("stuck-a", "payments"), pod("stuck-b", "ledger")}
	for i := 0; i < churnPods; i++ {
		pods = append(pods, pod(fmt.Sprintf("churn-%02d", i), "churn"))
	}
	for _, p := range pods {
		if err := st.Kubelet.WriteStaticPod(p); err != nil {
			return nil, err
		}
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		out, running, err := statusPods(ctx, rs)
		if err == nil && len(out) == len(pods) && running == len(pods) {
			return out, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("after 5m the kubelet runs %d of %d static pods, %d app containers (%v)", len(out), len(pods), running, err)
		}
		time.Sleep(time.Second)
	}
}

func statusPods(ctx context.Context, rs runtimeapi.RuntimeServiceClient) (map[string]*runtimeapi.PodSandbox, int, error) {
	ss, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
	}})
	if err != nil {
		return nil, 0, err
	}
	out := map[string]*runtimeapi.PodSandbox{}
	for _, s := range ss.GetItems() {
		out[strings.TrimSuffix(s.GetMetadata().GetName(), "-"+testenv.KubeletNode)] = s
	}
	cs, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	}})
	if err != nil {
		return nil, 0, err
	}
	return out, len(cs.GetContainers()), nil
}

// killApp stops a pod's running container at once, past the kubelet, as
// when its process dies: the kubelet's next relist sees it exited.
func killApp(ctx context.Context, rs runtimeapi.RuntimeServiceClient, sb *runtimeapi.PodSandbox) error {
	cs, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		PodSandboxId: sb.GetId(), State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	}})
	if err != nil {
		return err
	}
	if len(cs.GetContainers()) == 0 {
		return fmt.Errorf("%s has no running container", sb.GetMetadata().GetName())
	}
	for _, c := range cs.GetContainers() {
		if _, err := rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c.GetId(), Timeout: 0}); err != nil {
			return err
		}
	}
	return nil
}

// failedStatusLines is every failed PodSandboxStatus the kubelet logged
// since, by sandbox id.
func failedStatusLines(k *testenv.Kubelet, since time.Time) map[string][]testenv.LogLine {
	out := map[string][]testenv.LogLine{}
	for {
		l, ok := k.FindLog(since, logSandboxStatusFailed)
		if !ok {
			return out
		}
		since = l.At.Add(time.Microsecond)
		if i := strings.Index(l.Text, `podSandboxID="`); i >= 0 {
			id := l.Text[i+len(`podSandboxID="`):]
			if j := strings.IndexByte(id, '"'); j >= 0 {
				out[id[:j]] = append(out[id[:j]], l)
			}
		}
	}
}

// deadlineGaps are the times between the kubelet's consecutive failed
// status calls, of any stuck sandbox: one relist waits on one sandbox after
// another, so each deadline follows the one before by the request timeout.
func deadlineGaps(failures map[string][]testenv.LogLine) []time.Duration {
	var all []time.Time
	for _, ls := range failures {
		for _, l := range ls {
			all = append(all, l.At)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Before(all[j]) })
	var out []time.Duration
	for i := 1; i < len(all); i++ {
		out = append(out, all[i].Sub(all[i-1]))
	}
	return out
}

// statusSample is one look at the kubelet's and the exporter's metrics.
type statusSample struct {
	at          time.Time
	kubeletAge  float64 // time() - kubelet_pleg_last_seen_seconds, at at
	exporterAge float64 // pleg_last_seen_seconds, moved to at
	relists     float64 // kubelet_pleg_relist_duration_seconds count and sum
	relistSum   float64
	inFlight    float64 // the largest pleg_relist_status_in_flight_seconds
	rpc         string
	reinspect   float64 // pleg_relist_reinspect_pods
}

// sampler scrapes the kubelet and the exporter every few seconds.
type sampler struct {
	st      *stack.Stack
	mu      sync.Mutex
	samples []statusSample
	rpcs    map[string]float64 // rpc -> the largest in-flight age seen
}

func (s *sampler) run(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if smp, ok := s.sample(); ok {
			s.mu.Lock()
			s.samples = append(s.samples, smp)
			s.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (s *sampler) sample() (statusSample, bool) {
	exp, err := scrapeExporter(s.st)
	eAt := time.Now()
	if err != nil {
		return statusSample{}, false
	}
	kub, err := s.st.Kubelet.Metrics()
	kAt := time.Now()
	if err != nil {
		return statusSample{}, false
	}
	seen, ok := testenv.Gauge(kub, "kubelet_pleg_last_seen_seconds", nil)
	age, eok := testenv.Gauge(exp, "pleg_last_seen_seconds", nil)
	if !ok || !eok || seen == 0 {
		return statusSample{}, false
	}
	smp := statusSample{at: kAt, kubeletAge: float64(kAt.UnixNano())/1e9 - seen, exporterAge: age + kAt.Sub(eAt).Seconds()}
	smp.relists, smp.relistSum, _ = testenv.Histogram(kub, "kubelet_pleg_relist_duration_seconds", 1)
	smp.reinspect, _ = testenv.Gauge(exp, "pleg_relist_reinspect_pods", nil)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rpcs == nil {
		s.rpcs = map[string]float64{}
	}
	for rpc, v := range testenv.ByLabel(exp, "pleg_relist_status_in_flight_seconds", "rpc") {
		if v > smp.inFlight {
			smp.inFlight, smp.rpc = v, rpc
		}
		s.rpcs[rpc] = math.Max(s.rpcs[rpc], v)
	}
	return smp, true
}

func (s *sampler) since(t time.Time) []statusSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []statusSample
	for _, smp := range s.samples {
		if !smp.at.Before(t) {
			out = append(out, smp)
		}
	}
	return out
}

func (s *sampler) last() (statusSample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) == 0 {
		return statusSample{}, false
	}
	return s.samples[len(s.samples)-1], true
}

// inFlightRPC says which status calls the exporter reported in flight.
func (s *sampler) inFlightRPC() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for rpc, v := range s.rpcs {
		if v > 0 {
			out = append(out, fmt.Sprintf("%s %.0f s", rpc, v))
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "none in flight"
	}
	return strings.Join(out, ", ")
}

// waitRecovered waits after release until the kubelet relisted (its age
// small again) and the exporter's age is back within an interval.
func waitRecovered(t *testing.T, ctx context.Context, smp *sampler, released time.Time) (kubelet, exporter time.Duration) {
	t.Helper()
	for kubelet == 0 || exporter == 0 {
		if s, ok := smp.last(); ok && s.at.After(released) {
			if kubelet == 0 && s.kubeletAge < float64(time.Since(released)/time.Second)+1 && s.kubeletAge < 5 {
				kubelet = s.at.Sub(released)
			}
			if exporter == 0 && s.exporterAge < (relistInterval+2*time.Second).Seconds() && s.exporterAge < s.at.Sub(released).Seconds()+1 {
				exporter = s.at.Sub(released)
			}
		}
		if time.Since(released) > 3*time.Minute || ctx.Err() != nil {
			t.Fatalf("3m after release: the kubelet relisted after %s, the exporter after %s (0: not yet)", kubelet, exporter)
		}
		time.Sleep(500 * time.Millisecond)
	}
	return kubelet, exporter
}

// kubeletRelists lists the kubelet's relists that finished between from and
// to: when (by the sample that first counted it) and how long each took
// (kubelet_pleg_relist_duration_seconds), relative to from.
func kubeletRelists(samples []statusSample, from, to time.Time) string {
	var out []string
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1], samples[i]
		if b.at.Before(from) || b.at.After(to) || b.relists <= a.relists {
			continue
		}
		n := b.relists - a.relists
		mean := (b.relistSum - a.relistSum) / n
		if mean < 5 {
			continue // the healthy ones, a second apart
		}
		if n == 1 {
			out = append(out, fmt.Sprintf("one by +%s taking %.1f s", b.at.Sub(from).Round(time.Second), mean))
		} else {
			out = append(out, fmt.Sprintf("%.0f by +%s taking %.1f s together", n, b.at.Sub(from).Round(time.Second), b.relistSum-a.relistSum))
		}
	}
	if len(out) == 0 {
		return "none longer than 5 s finished"
	}
	return strings.Join(out, "; ")
}

// series is the samples every step apart, for the log.
func series(samples []statusSample, from, to time.Time, step time.Duration) string {
	var out []string
	next := from
	for _, s := range samples {
		if s.at.Before(next) || s.at.After(to) {
			continue
		}
		next = s.at.Add(step)
		l := fmt.Sprintf("+%s kubelet %.0f s exporter %.0f s", s.at.Sub(from).Round(time.Second), s.kubeletAge, s.exporterAge)
		if s.inFlight > 0 {
			l += fmt.Sprintf(" (%s in flight %.0f s)", s.rpc, s.inFlight)
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// between is the first sample at or after from and the last at or before to.
func between(samples []statusSample, from, to time.Time) (a, b statusSample, ok bool) {
	var haveA bool
	for _, s := range samples {
		if s.at.Before(from) || s.at.After(to) {
			continue
		}
		if !haveA {
			a, haveA = s, true
		}
		b = s
	}
	return a, b, haveA && b.at.After(a.at)
}

// peaks are the highest ages overall and before the first reset after
// the first deadline (the one-sandbox cycle).
func peaks(samples []statusSample, firstDeadline, end time.Time) (k, e, k1, e1 float64) {
	for _, s := range samples {
		if s.at.After(end) {
			break
		}
		k, e = math.Max(k, s.kubeletAge), math.Max(e, s.exporterAge)
		if s.at.Before(firstDeadline.Add(20 * time.Second)) {
			k1, e1 = math.Max(k1, s.kubeletAge), math.Max(e1, s.exporterAge)
		}
	}
	return k, e, k1, e1
}

type trackResult struct {
	n, resets         int
	maxDiff, meanDiff float64
	maxLag            time.Duration
}

// tracking compares the two ages sample by sample. Within one cycle (both
// counting from relists less than 30 s apart) they differ by the time
// between the kubelet's relist start and the exporter's; after the kubelet's
// age drops (a relist after a hung one) the exporter's drops too, and the
// lag is how long the two counted from different cycles.
func tracking(samples []statusSample, from, to time.Time) trackResult {
	var r trackResult
	var sum float64
	var matched int
	var mismatchSince time.Time
	for i, s := range samples {
		if s.at.Before(from) || s.at.After(to) {
			continue
		}
		r.n++
		kSeen, eSeen := s.at.Add(-secs(s.kubeletAge)), s.at.Add(-secs(s.exporterAge))
		if i > 0 && samples[i-1].kubeletAge-s.kubeletAge > 30 {
			r.resets++
		}
		if d := math.Abs(kSeen.Sub(eSeen).Seconds()); d <= 30 {
			r.maxDiff = math.Max(r.maxDiff, d)
			sum += d
			matched++
			if !mismatchSince.IsZero() {
				// The lag: from the sample before the mismatch began
				// (when both still agreed) to this one, at most.
				if lag := s.at.Sub(mismatchSince); lag > r.maxLag {
					r.maxLag = lag
				}
				mismatchSince = time.Time{}
			}
		} else if mismatchSince.IsZero() && i > 0 {
			mismatchSince = samples[i-1].at
		}
	}
	if matched > 0 {
		r.meanDiff = sum / float64(matched)
	}
	return r
}

func secs(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

func maxOf(samples []statusSample, f func(statusSample) float64) float64 {
	m := 0.0
	for _, s := range samples {
		m = math.Max(m, f(s))
	}
	return m
}

// alertTimeline is each alert's first firing and first resolution at the
// webhook since.
func alertTimeline(rec *receiver, since time.Time, at func(time.Time) string) string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	type seen struct{ fired, resolved time.Time }
	byName := map[string]*seen{}
	var names []string
	for _, e := range rec.events {
		if e.at.Before(since) {
			continue
		}
		n := alertName(e)
		if byName[n] == nil {
			byName[n] = &seen{}
			names = append(names, n)
		}
		if e.status == "firing" && byName[n].fired.IsZero() {
			byName[n].fired = e.at
		}
		if e.status == "resolved" && byName[n].resolved.IsZero() {
			byName[n].resolved = e.at
		}
	}
	var out []string
	for _, n := range names {
		s := n
		if !byName[n].fired.IsZero() {
			s += " fired " + at(byName[n].fired)
		}
		if !byName[n].resolved.IsZero() {
			s += " resolved " + at(byName[n].resolved)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}

// checkDiagnosis: diagnose's text names both stuck pods and the call.
func checkDiagnosis(t *testing.T, out string, err error, took time.Duration, pods ...string) {
	t.Helper()
	if err != nil {
		t.Errorf("pleg_exporter diagnose: %v\n%s", err, out)
		return
	}
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "PodSandboxStatus") {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	t.Logf("status: pleg_exporter diagnose took %s; its lines on the call:\n%s", took.Round(100*time.Millisecond), strings.Join(lines, "\n"))
	for _, p := range pods {
		name := p + "-" + testenv.KubeletNode
		if !strings.Contains(out, name) {
			t.Errorf("pleg_exporter diagnose does not name %s:\n%s", name, out)
		}
	}
	if len(lines) == 0 {
		t.Errorf("pleg_exporter diagnose does not name the hanging call PodSandboxStatus:\n%s", out)
	}
}

// statusChurn makes churnPods pods change every second for churnFor: each second
// a new never-started container in each pod and the one before removed, so
// that every relist of either finds every pod changed, with every
// ContainerStatus churnDelay slow. The kubelet's mean relist and the
// exporter's mean list + status pass over the window must agree within a
// factor of two; PLEGStatusPassNearThreshold must stay quiet.
func statusChurn(t *testing.T, ctx context.Context, st *stack.Stack, rs runtimeapi.RuntimeServiceClient, sandboxes map[string]*runtimeapi.PodSandbox) {
	// Whatever fired while the sandboxes were stuck ends first, so what
	// the near-threshold alert does here is the churn's.
	nearThreshold := func() string {
		res, err := st.Query(ctx, `ALERTS{alertname="PLEGStatusPassNearThreshold"}`)
		if err != nil || len(res) == 0 {
			return ""
		}
		return res[0].Metric["alertstate"]
	}
	for deadline := time.Now().Add(90 * time.Second); nearThreshold() != "" && time.Now().Before(deadline); {
		time.Sleep(2 * time.Second)
	}
	undo := st.Proxy.Delay(criproxy.ContainerStatus, churnDelay)
	defer undo()
	pc := &testenv.PodClient{RS: rs}
	var pods []*testenv.Pod
	for name, sb := range sandboxes {
		if strings.HasPrefix(name, "churn-") {
			pods = append(pods, testenv.ExistingPod(sb))
		}
	}
	start := time.Now()
	var changes, failed sync.Map
	var wg sync.WaitGroup
	for _, pod := range pods {
		wg.Add(1)
		go func(pod *testenv.Pod) {
			defer wg.Done()
			var prev string
			n, bad := 0, 0
			for i := 0; time.Since(start) < churnFor; i++ {
				id, err := pc.CreateContainer(ctx, pod, testenv.ContainerSpec{Name: "churn", Attempt: uint32(i)})
				if err != nil {
					bad++
				} else {
					n++
				}
				if prev != "" {
					pc.RemoveContainer(ctx, prev)
				}
				prev = id
				if wait := time.Until(start.Add(time.Duration(i+1) * time.Second)); wait > 0 {
					time.Sleep(wait)
				}
			}
			if prev != "" {
				pc.RemoveContainer(ctx, prev)
			}
			changes.Store(pod.Name, n)
			failed.Store(pod.Name, bad)
		}(pod)
	}
	// The window: from churnMeasured into the churn to its end.
	var k1, e1 map[string]*dto.MetricFamily
	var states []string
	var proxyCalls int64
	time.Sleep(churnMeasured)
	k1, errK := st.Kubelet.Metrics()
	e1, errE := scrapeExporter(st)
	calls1 := st.Proxy.Calls("ContainerStatus")
	for time.Since(start) < churnFor {
		if s := nearThreshold(); s != "" {
			states = append(states, fmt.Sprintf("%s at +%s", s, time.Since(start).Round(time.Second)))
		}
		time.Sleep(3 * time.Second)
	}
	k2, errK2 := st.Kubelet.Metrics()
	e2, errE2 := scrapeExporter(st)
	proxyCalls = st.Proxy.Calls("ContainerStatus") - calls1
	window := time.Since(start) - churnMeasured
	wg.Wait()
	if err := errors.Join(errK, errE, errK2, errE2); err != nil {
		t.Fatalf("churn: scrapes: %v", err)
	}
	total, bad := 0, 0
	changes.Range(func(_, v any) bool { total += v.(int); return true })
	failed.Range(func(_, v any) bool { bad += v.(int); return true })
	t.Logf("status churn: %d pods, %d new containers (and as many removed) in %s: %.1f pod changes a second, %d creations failed; ContainerStatus delayed %s, %d of them in the %s window (%.0f a second)",
		len(pods), total, churnFor, float64(total)/churnFor.Seconds(), bad, churnDelay, proxyCalls, window.Round(time.Second), float64(proxyCalls)/window.Seconds())

	kn, kmean := histDelta(k1, k2, "kubelet_pleg_relist_duration_seconds")
	sn, smean := histDelta(e1, e2, "pleg_relist_status_duration_seconds")
	ln, lmean := histDelta(e1, e2, "pleg_relist_duration_seconds")
	pods2, _ := testenv.Gauge(e2, "pleg_relist_status_pods", nil)
	exporterMean := smean + lmean
	t.Logf("status churn: over %s the kubelet relisted %.0f times, mean %.0f ms (kubelet_pleg_relist_duration_seconds); the exporter relisted %.0f times, mean list %.0f ms + status pass %.0f ms (%.0f passes) = %.0f ms, its last pass inspected %.0f pods; ratio %.2f",
		window.Round(time.Second), kn, kmean*1000, ln, lmean*1000, smean*1000, sn, exporterMean*1000, pods2, exporterMean/kmean)
	if kn == 0 || sn == 0 {
		t.Errorf("churn: no relist in the window (kubelet %v, exporter status passes %v)", kn, sn)
	} else if r := exporterMean / kmean; r > 2 || r < 0.5 {
		t.Errorf("churn: the exporter's mean list + status pass (%.0f ms) and the kubelet's mean relist (%.0f ms) differ by more than a factor of two", exporterMean*1000, kmean*1000)
	}
	if float64(total)/churnFor.Seconds() < churnPods/2 {
		t.Errorf("churn: only %.1f pod changes a second, want about %d", float64(total)/churnFor.Seconds(), churnPods)
	}
	if len(states) == 0 {
		t.Logf("status churn: PLEGStatusPassNearThreshold stayed quiet (inactive in Prometheus throughout)")
	} else {
		t.Errorf("status churn: PLEGStatusPassNearThreshold was %s", strings.Join(states, ", "))
	}
}

// histDelta is a histogram's count and mean between two scrapes.
func histDelta(a, b map[string]*dto.MetricFamily, name string) (n, mean float64) {
	c1, s1, _ := testenv.Histogram(a, name, 1)
	c2, s2, _ := testenv.Histogram(b, name, 1)
	if n = c2 - c1; n > 0 {
		mean = (s2 - s1) / n
	}
	return n, mean
}

// waitStatusIdle waits until the exporter has nothing left to inspect: no
// pod pending from start-up, none to reinspect, and no status call made
// over more than one relist interval.
func waitStatusIdle(ctx context.Context, st *stack.Stack, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var since time.Time
	last := -1.0
	for {
		ms, err := scrapeExporter(st)
		if err == nil {
			calls := 0.0
			for _, m := range ms["pleg_relist_status_calls_total"].GetMetric() {
				calls += m.GetCounter().GetValue()
			}
			idle := gaugeValue(ms, "pleg_relist_status_pending_pods") == 0 && gaugeValue(ms, "pleg_relist_reinspect_pods") == 0
			switch {
			case !idle || calls != last:
				since, last = time.Now(), calls
			case time.Since(since) > relistInterval+3*time.Second:
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the exporter's status pass was not idle within %s (last error %v)", timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func gaugeValue(ms map[string]*dto.MetricFamily, name string) float64 {
	for _, m := range ms[name].GetMetric() {
		return m.GetGauge().GetValue()
	}
	return -1
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
