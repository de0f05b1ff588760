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
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/internal/stack"
	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// The kubelet of today's clusters: containerd 2.4 with the kubelet's
// CRIListStreaming and EventedPLEG gates on. containerd streams lists in
// messages of up to 5000 items, each still under the 16 MiB limit.
//
//  1. 20 never-started containers of ~900 KiB, one stream message past the
//     limit. The kubelet starts into it (containerd refuses new containers
//     in the sandboxes the kubelet stops, and it stops every pod it does not
//     know, so they are made first) and fails like a unary list.
//  2. Restarted in it, the kubelet never relists.
//  3. They go: it relists through streaming, every second with EventedPLEG.
//  4. Churn in the kubelet's own static pods.
//  5. PLEG_E2E_LONG=1 only: ~5300 small containers (4600 never started, 700
//     exited; unique names, so that the kubelet's pod container deletor
//     keeps them) in those static pods, 17 MB in all, about 16 MB in the
//     first message. Every message fits though the whole answer does not:
//     the kubelet relists and nothing may page. containerd 2.4 creates them
//     at 10–60 a second, slower as they pile up: minutes, too long for make
//     test. (Not many more: containerd keeps two FIFOs open per created
//     container and past ~4900 it hits this machine's hard limit of open
//     files, which root cannot raise here.)
//  6. One message past the limit again, in a kubelet that relists: its
//     relist fails, PLEGKubeletStalled fires (the long run waits for "PLEG
//     is not healthy": the threshold with EventedPLEG on), and a restart of
//     that kubelet leaves kubelet_pleg_last_seen_seconds at 0, where only
//     PLEGKubeletNeverRelisted speaks.
//
// RECORD_SERIES=file writes the series Prometheus scraped as a promtool test
// and runs it (make record-streaming: mixin/tests/recorded_streaming_test.yaml).
func TestKubeletStreaming(t *testing.T) {
	if err := stack.Check(); err != nil {
		unavailable(t, err)
	}
	kubeletBin, err := testenv.KubeletBinary()
	if err != nil {
		unavailable(t, err)
	}
	bins, err := testenv.Containerd2Dir()
	if err != nil {
		unavailable(t, err)
	}
	long := os.Getenv("PLEG_E2E_LONG") != ""
	dir, err := os.MkdirTemp("", "pleg-e2e-streaming")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	bin := buildExporter(t)
	var large []string
	populate := func(c *testenv.Containerd) error {
		// Thousands of containers: the teardown kills rather than removes.
		c.SkipPodRemoval = true
		t0 := time.Now()
		cc, err := c.Dial(256 << 20)
		if err != nil {
			return err
		}
		defer cc.Close()
		pc := &testenv.PodClient{RS: runtimeapi.NewRuntimeServiceClient(cc), LogDir: filepath.Join(dir, "pod-logs")}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		pods, err := runPods(ctx, pc, "stream-large", 4)
		if err != nil {
			return err
		}
		if large, err = fill(ctx, pc, pods, "left", 20, 900<<10, false); err != nil {
			return err
		}
		t.Logf("populated %d large never-started containers in %s", len(large), time.Since(t0).Round(time.Second))
		return nil
	}
	st, err := stack.Start(stack.Options{
		Dir: dir, ExporterBinary: bin, RulesDir: filepath.Join(repo, "mixin", "generated"),
		Log: testLog{t}, RelistInterval: "5s", Kubelet: kubeletBin, MinContainerTTL: 24 * time.Hour,
		ContainerdBinaries: bins, BeforeKubelet: populate, KubeletIntoOverflow: true,
		FeatureGates: map[string]bool{"CRIListStreaming": true, "EventedPLEG": true},
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
		}
	}()
	started := time.Now()
	ctx, rs := runtimeClient(t, st)
	rec := &stack.Recording{Start: started, Hold: os.Getenv("RECORD_SERIES") != ""}

	ms, err := st.Kubelet.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	for _, gate := range []string{"CRIListStreaming", "EventedPLEG"} {
		if v, ok := testenv.Gauge(ms, "kubernetes_feature_enabled", map[string]string{"name": gate}); !ok || v != 1 {
			t.Fatalf("kubernetes_feature_enabled{name=%q} = %v (exported %v), want 1", gate, v, ok)
		}
	}

	// 1. One stream message past the limit: the kubelet's streamed relist
	// fails like a unary one, and the exporter says why.
	failed, ok := st.Kubelet.WaitLog(started.Add(-time.Minute), time.Minute, logRelistFailed, "ResourceExhausted")
	if !ok {
		t.Fatalf("the streaming kubelet never failed a relist past the limit")
	}
	t.Logf("large: the streaming kubelet: %s", clip(failed.Text, 300))
	got := waitExporter(t, st, func(m map[string]*dto.MetricFamily) bool {
		v, _ := testenv.Gauge(m, "pleg_relist_stream_message_max_bytes", map[string]string{"rpc": "ListContainers"})
		return v > grpcLimit
	})
	whole, largest := streamSizes(t, ctx, rs)
	msg, _ := testenv.Gauge(got, "pleg_relist_stream_message_max_bytes", map[string]string{"rpc": "ListContainers"})
	pay, _ := testenv.Gauge(got, "pleg_relist_payload_bytes", map[string]string{"rpc": "ListContainers"})
	if _, ok := testenv.Gauge(got, "pleg_runtime_info", map[string]string{"streaming": "true"}); !ok {
		t.Errorf("pleg_runtime_info{streaming=\"true\"} missing on containerd %s", testenv.Containerd2Version)
	}
	if pay != float64(whole) {
		t.Errorf("payload %v, the whole answer is %d bytes", pay, whole)
	}
	t.Logf("large: whole answer %d B, largest stream message %d B (the harness's stream, limit %d); the exporter: payload %.0f B, largest message %.0f B",
		whole, largest, grpcLimit, pay, msg)
	waitAlert(t, ctx, st, "PLEGPayloadOverLimit", "firing", 2*time.Minute)
	// The whole answer is past the limit too: what proves the mixin judges
	// the stream message here is its rule on the live series, the kubelet's
	// gate joined to the exporter's node.
	if ratio := liveValue(t, ctx, st, `instance_rpc:pleg_relist_kubelet_payload_bytes:ratio_limit{rpc="ListContainers"} and on (node) instance:pleg_kubelet_list_streaming:bool == 1`); ratio != msg/grpcLimit {
		t.Errorf("the mixin judges %v of the limit on a streaming kubelet, the largest message is %v", ratio, msg/grpcLimit)
	}
	rec.Check("large: the kubelet fails, the page is right", time.Now())

	// 2. Restarted into the overflow: no relist ever succeeds, so
	// kubelet_pleg_last_seen_seconds stays 0 while the kubelet is up.
	restart := time.Now()
	if err := st.Kubelet.Restart(); err != nil {
		t.Fatal(err)
	}
	line, ok := st.Kubelet.WaitLog(restart, time.Minute, "pleg has yet to be successful")
	if !ok {
		t.Errorf("the restarted kubelet never said \"pleg has yet to be successful\"")
	} else {
		t.Logf("restarted: after %s: %s", line.At.Sub(restart).Round(100*time.Millisecond), clip(line.Text, 200))
	}
	zeroSince := time.Now()
	for time.Since(zeroSince) < 10*time.Second {
		ms, err := st.Kubelet.Metrics()
		if err != nil {
			t.Fatalf("the restarted kubelet's metrics: %v", err)
		}
		if v, ok := testenv.Gauge(ms, "kubelet_pleg_last_seen_seconds", nil); !ok || v != 0 {
			t.Fatalf("kubelet_pleg_last_seen_seconds = %v (exported %v) in the overflow, want 0", v, ok)
		}
		time.Sleep(5 * time.Second)
	}
	// The gauge was 0 since the kubelet's first start too: the alert may
	// have fired before; step 6 restarts a kubelet that had relisted.
	fired := waitAlert(t, ctx, st, "PLEGKubeletNeverRelisted", "firing", 3*time.Minute)
	t.Logf("restarted: kubelet_pleg_last_seen_seconds stayed 0; PLEGKubeletNeverRelisted firing in Prometheus %s after the restart",
		fired.Sub(restart).Round(time.Second))
	rec.Check("started and restarted into the overflow: PLEGKubeletNeverRelisted", time.Now())

	// 3. The large ones go. The kubelet relists, through streaming, every
	// second with EventedPLEG on.
	removed := time.Now()
	if err := removeParallel(ctx, rs, large); err != nil {
		t.Fatal(err)
	}
	t.Logf("removed the %d large containers in %s", len(large), time.Since(removed).Round(100*time.Millisecond))
	relisted := waitRelisted(t, st)
	t.Logf("the kubelet's first successful relist %s after the removal began", relisted.Sub(removed).Round(time.Second))
	// The kubelet's relists: last seen fresh over 20 s, a 1 s period.
	w, ms := relists(t, st, 20*time.Second)
	if w.worst > 5 || w.n < 10 || w.period > 2 {
		t.Errorf("the streaming kubelet's last seen reached %.0f s, %.0f relists in 20 s, mean interval %.2f s", w.worst, w.n, w.period)
	}
	t.Logf("EventedPLEG on: the kubelet relisted %.0f times in 20 s, mean interval %.2f s, mean relist %.0f ms; time() - kubelet_pleg_last_seen_seconds at most %.0f s",
		w.n, w.period, 1000*w.meanRelist, w.worst)
	if evented := evented(ms); evented != "" {
		t.Logf("EventedPLEG on: the kubelet's evented metrics: %s", evented)
	}
	// The pages of the overflow resolve.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(5 * time.Second) {
		active, pages := pagesNow(t, ctx, st)
		if len(pages) == 0 {
			t.Logf("relisting through streaming: active alerts %v", active)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kubelet relists through streaming, yet after 2m: %v", pages)
		}
	}
	rec.Check("relisting through streaming: no page", time.Now())

	// 4. Churn in the kubelet's own pods.
	sandboxes := churn(t, ctx, st, rs)

	// 5. Every message fits, the whole answer does not (long run).
	if long {
		smallMessages(t, ctx, st, rs, sandboxes, rec)
	}

	// 6. A relisting kubelet overflows, is restarted, never relists.
	overflowRestart(t, ctx, st, rs, sandboxes, long, rec)
	if path := os.Getenv("RECORD_SERIES"); path != "" {
		what, err := rec.Write(ctx, st.API(), path, stack.RecordingFile{
			Name: "recorded on a real kubelet v1.37.2 with CRIListStreaming and EventedPLEG on containerd " + testenv.Containerd2Version +
				" (TestKubeletStreaming" + map[bool]string{true: ", PLEG_E2E_LONG=1", false: ", as in make test"}[long] + ")",
			Header: []string{"Generated by TestKubeletStreaming with RECORD_SERIES=<this file> (make record-streaming): the series",
				"Prometheus scraped from the exporter and a real kubelet, and the alerts it had firing at each check."},
			RuleFiles: []string{"../generated/prometheus_rules.yaml", "../generated/prometheus_alerts.yaml"},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("recorded %s into %s", what, path)
	}
}

func runPods(ctx context.Context, pc *testenv.PodClient, ns string, n int) ([]*testenv.Pod, error) {
	var ps []*testenv.Pod
	for i := 0; i < n; i++ {
		p, err := pc.RunPod(ctx, ns, fmt.Sprintf("%s-%d", ns, i))
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// fill makes n containers named name-i with a pad-byte annotation in the
// pods, eight at a time: never started, or (exited) run /bin/true to its
// end. Unique names: the kubelet's pod container deletor keeps the newest
// exited container of each name in a pod it runs.
func fill(ctx context.Context, pc *testenv.PodClient, ps []*testenv.Pod, name string, n, pad int, exited bool) ([]string, error) {
	annotation := map[string]string{"example.com/payload": strings.Repeat("s", pad)}
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				spec := testenv.ContainerSpec{Name: fmt.Sprintf("%s-%d", name, i), ExtraAnnotations: annotation}
				if exited {
					spec.Command, spec.Start = []string{"/bin/true"}, true
				}
				id, err := pc.CreateContainer(ctx, ps[i%len(ps)], spec)
				if err != nil {
					errs <- err
					return
				}
				ids[i] = id
			}
		}()
	}
	wg.Wait()
	close(errs)
	return ids, <-errs
}

func removeParallel(ctx context.Context, rs runtimeapi.RuntimeServiceClient, ids []string) error {
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(ids); i += 4 {
				if _, err := rs.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: ids[i]}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// streamSizes is the whole ListContainers answer and the largest message
// of a StreamContainers, read by the harness's own client: from the
// answers, or from containerd's refusal to send one past its limit.
func streamSizes(t *testing.T, ctx context.Context, rs runtimeapi.RuntimeServiceClient) (whole, largest int) {
	t.Helper()
	size := func(err error) int {
		n, _, ok := kubecontainer.ParseMessageSize(status.Convert(err).Message())
		if status.Code(err) != codes.ResourceExhausted || !ok {
			t.Fatalf("list containers: %v", err)
		}
		return int(n)
	}
	resp, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{}})
	if err == nil {
		whole = proto.Size(resp)
	} else {
		whole = size(err)
	}
	st, err := rs.StreamContainers(ctx, &runtimeapi.StreamContainersRequest{Filter: &runtimeapi.ContainerFilter{}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			largest = max(largest, size(err))
			break
		}
		largest = max(largest, proto.Size(m))
	}
	return whole, largest
}

func waitExporter(t *testing.T, st *stack.Stack, ok func(map[string]*dto.MetricFamily) bool) map[string]*dto.MetricFamily {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		ms, err := scrapeExporter(st)
		if err == nil && ok(ms) {
			return ms
		}
		if time.Now().After(deadline) {
			t.Fatalf("the exporter did not report it within a minute (%v)", err)
		}
	}
}

func exporterContainers(ms map[string]*dto.MetricFamily) float64 {
	n := 0.0
	for _, m := range ms["pleg_containers"].GetMetric() {
		n += m.GetGauge().GetValue()
	}
	return n
}

// staticContainers counts the containers not in the test's own pods.
func staticContainers(t *testing.T, ctx context.Context, rs runtimeapi.RuntimeServiceClient) float64 {
	t.Helper()
	n := 0.0
	for _, state := range []runtimeapi.ContainerState{0, 1, 2, 3} {
		resp, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
			State: &runtimeapi.ContainerStateValue{State: state}, LabelSelector: map[string]string{"io.kubernetes.pod.namespace": "default"}}})
		if err != nil {
			t.Fatal(err)
		}
		n += float64(len(resp.GetContainers()))
	}
	return n
}

// waitAlert waits until Prometheus has the alert in state and returns when.
func waitAlert(t *testing.T, ctx context.Context, st *stack.Stack, name, state string, timeout time.Duration) time.Time {
	t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(time.Second) {
		res, err := st.Query(ctx, fmt.Sprintf(`ALERTS{alertname=%q, alertstate=%q}`, name, state))
		if err == nil && len(res) > 0 {
			return time.Now()
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("%s not %s in Prometheus within %s (%v)", name, state, timeout, err)
		}
	}
}

func churn(t *testing.T, ctx context.Context, st *stack.Stack, rs runtimeapi.RuntimeServiceClient) []*testenv.Pod {
	const pods, window, life = 5, 20 * time.Second, 12 * time.Second
	grace := int64(1)
	var names []string
	for i := 0; i < pods; i++ {
		name := fmt.Sprintf("churn-%d", i)
		names = append(names, name+"-"+testenv.KubeletNode)
		if err := st.Kubelet.WriteStaticPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{
			HostNetwork: true, TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "app", Image: testenv.Image, Command: []string{"/bin/sleep", "100000"}}},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	var sandboxes []*testenv.Pod
	for deadline := time.Now().Add(2 * time.Minute); len(sandboxes) < pods; time.Sleep(time.Second) {
		sandboxes = sandboxes[:0]
		resp, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
			State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}})
		if err == nil {
			for _, s := range resp.GetItems() {
				for _, n := range names {
					if s.GetMetadata().GetName() == n {
						sandboxes = append(sandboxes, testenv.ExistingPod(s))
					}
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kubelet started %d of %d churn pods in 2m", len(sandboxes), pods)
		}
	}
	pc := &testenv.PodClient{RS: rs}
	// Quiet first: two relists with nothing changing, and the kubelet's
	// relists over a window as long as the churn's.
	time.Sleep(12 * time.Second)
	kms, _ := st.Kubelet.Metrics()
	q0, qs0, _ := testenv.Histogram(kms, "kubelet_pleg_relist_duration_seconds", 1)
	time.Sleep(window)
	before, err := scrapeExporter(st)
	if err != nil {
		t.Fatal(err)
	}
	kms, _ = st.Kubelet.Metrics()
	n0, s0, _ := testenv.Histogram(kms, "kubelet_pleg_relist_duration_seconds", 1)
	var mu sync.Mutex
	created := 0
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < pods; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Since(start) < window; i++ {
				id, err := pc.CreateContainer(ctx, sandboxes[w], testenv.ContainerSpec{Name: fmt.Sprintf("churn-%d", i), Attempt: uint32(i)})
				if err != nil {
					t.Errorf("churn: %v", err)
					return
				}
				mu.Lock()
				created++
				mu.Unlock()
				wg.Add(1)
				time.AfterFunc(life, func() {
					defer wg.Done()
					pc.RemoveContainer(context.Background(), id)
				})
				time.Sleep(200 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	kms, _ = st.Kubelet.Metrics()
	n1, s1, _ := testenv.Histogram(kms, "kubelet_pleg_relist_duration_seconds", 1)
	took := time.Since(start)
	time.Sleep(12 * time.Second) // two relists after the last removal
	after, err := scrapeExporter(st)
	if err != nil {
		t.Fatal(err)
	}
	dc := counter(after, "pleg_relist_changed_containers_total") - counter(before, "pleg_relist_changed_containers_total")
	dp := counter(after, "pleg_relist_changed_pods_total") - counter(before, "pleg_relist_changed_pods_total")
	if dc != float64(2*created) {
		t.Errorf("churn: the exporter counted %.0f changed containers, want %d (%d created and removed)", dc, 2*created, created)
	}
	t.Logf("churn: %d containers created and removed in %d static pods over %s: the exporter counted %.0f container and %.0f pod changes (%.1f pods/s); the kubelet's mean relist %.1f ms over %.0f relists during it, %.1f ms over %.0f relists in the %s before",
		created, pods, took.Round(time.Second), dc, dp, dp/took.Seconds(), 1000*(s1-s0)/(n1-n0), n1-n0, 1000*(s0-qs0)/(n0-q0), n0-q0, window)
	return sandboxes
}

type relistWindow struct {
	n, period, meanRelist, worst float64
}

// relists watches the kubelet's relists over a window: how many, their
// mean interval and duration, and the oldest kubelet_pleg_last_seen_seconds
// seen, sampled every second.
func relists(t *testing.T, st *stack.Stack, window time.Duration) (relistWindow, map[string]*dto.MetricFamily) {
	t.Helper()
	ms, err := st.Kubelet.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	n0, s0, _ := testenv.Histogram(ms, "kubelet_pleg_relist_interval_seconds", 2)
	d0, ds0, _ := testenv.Histogram(ms, "kubelet_pleg_relist_duration_seconds", 1)
	var w relistWindow
	for t1 := time.Now(); time.Since(t1) < window; time.Sleep(time.Second) {
		if ms, err = st.Kubelet.Metrics(); err != nil {
			t.Fatal(err)
		}
		v, _ := testenv.Gauge(ms, "kubelet_pleg_last_seen_seconds", nil)
		w.worst = max(w.worst, float64(time.Now().Unix())-v)
	}
	n1, s1, _ := testenv.Histogram(ms, "kubelet_pleg_relist_interval_seconds", 2)
	d1, ds1, _ := testenv.Histogram(ms, "kubelet_pleg_relist_duration_seconds", 1)
	w.n = n1 - n0
	if w.n > 0 {
		w.period = (s1 - s0) / w.n
	}
	if d1 > d0 {
		w.meanRelist = (ds1 - ds0) / (d1 - d0)
	}
	return w, ms
}

func counter(ms map[string]*dto.MetricFamily, name string) float64 {
	v, _ := testenv.Gauge(ms, name, nil)
	return v
}

// evented lists the kubelet's metrics of its evented PLEG watcher.
func evented(ms map[string]*dto.MetricFamily) string {
	var out []string
	for name, mf := range ms {
		if !strings.Contains(name, "evented") {
			continue
		}
		for _, m := range mf.GetMetric() {
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
			out = append(out, fmt.Sprintf("%s=%g", name, v))
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// smallMessages fills the kubelet's static pods with ~5300 small
// containers: the whole answer past the limit, every stream message
// within it. The kubelet must relist and nothing may page.
func smallMessages(t *testing.T, ctx context.Context, st *stack.Stack, rs runtimeapi.RuntimeServiceClient, sandboxes []*testenv.Pod, rec *stack.Recording) {
	pc := &testenv.PodClient{RS: rs}
	start := time.Now()
	// containerd holds two FIFOs open per created container and this
	// machine caps it near 10,000 open files: past ~4900 created containers
	// it refuses more. Exited ones hold none.
	if _, err := fill(ctx, pc, sandboxes, "left", 4600, 2400, false); err != nil {
		t.Fatalf("small: %v", err)
	}
	if _, err := fill(ctx, pc, sandboxes, "done", 700, 2400, true); err != nil {
		t.Fatalf("small: %v", err)
	}
	filled := time.Now()
	whole, largest := streamSizes(t, ctx, rs)
	t.Logf("small: 4600 never-started and 700 exited containers in the %d static pods in %s: the whole answer %d B (%.0f%% of the limit), the largest stream message %d B (%.0f%%)",
		len(sandboxes), filled.Sub(start).Round(time.Second), whole, 100*float64(whole)/grpcLimit, largest, 100*float64(largest)/grpcLimit)
	if whole <= grpcLimit || largest >= grpcLimit {
		t.Errorf("small: whole answer %d B, largest message %d B: want past and within the limit", whole, largest)
		return
	}
	got := waitExporter(t, st, func(m map[string]*dto.MetricFamily) bool {
		v, _ := testenv.Gauge(m, "pleg_relist_stream_message_max_bytes", map[string]string{"rpc": "ListContainers"})
		p, _ := testenv.Gauge(m, "pleg_relist_payload_bytes", map[string]string{"rpc": "ListContainers"})
		return v > 0 && v < grpcLimit && p > grpcLimit
	})
	msg, _ := testenv.Gauge(got, "pleg_relist_stream_message_max_bytes", map[string]string{"rpc": "ListContainers"})
	pay, _ := testenv.Gauge(got, "pleg_relist_payload_bytes", map[string]string{"rpc": "ListContainers"})
	fb, _ := testenv.Gauge(got, "pleg_relist_fallback", nil)
	t.Logf("small: the exporter: payload %.0f B, largest stream message %.0f B, fallback %.0f, %.0f containers counted through streaming",
		pay, msg, fb, exporterContainers(got))
	// While they were made, every change cost the kubelet's relist a
	// GetPodStatus of a pod holding a thousand containers: it relisted
	// slowly. Once nothing changes it must relist steadily (up to 5
	// minutes), the pages of the busy spell clear (up to 3), and then for
	// three minutes (its threshold) nothing pages.
	settled := time.Now()
	for tries := 1; ; tries++ {
		w, _ := relists(t, st, 20*time.Second)
		t.Logf("small: window %d: the kubelet relisted %.0f times in 20 s, mean interval %.2f s, mean relist %.0f ms; time() - kubelet_pleg_last_seen_seconds at most %.0f s",
			tries, w.n, w.period, 1000*w.meanRelist, w.worst)
		if w.n >= 10 && w.worst <= 5 {
			break
		}
		if time.Since(settled) > 5*time.Minute {
			t.Errorf("small: the kubelet did not relist steadily within 5m of the last container's creation")
			break
		}
	}
	t.Logf("small: the kubelet relists steadily %s after the last creation", time.Since(settled).Round(time.Second))
	// The exporter's relist age as a streaming kubelet meets it stays
	// fresh; the unary one grows: every whole answer is past the limit.
	got = waitExporter(t, st, func(m map[string]*dto.MetricFamily) bool {
		v, ok := testenv.Gauge(m, "pleg_streaming_last_seen_seconds", nil)
		u, _ := testenv.Gauge(m, "pleg_last_seen_seconds", nil)
		return ok && v < 30 && u > 60
	})
	sls, _ := testenv.Gauge(got, "pleg_streaming_last_seen_seconds", nil)
	uls, _ := testenv.Gauge(got, "pleg_last_seen_seconds", nil)
	t.Logf("small: the exporter: pleg_streaming_last_seen_seconds %.1f, pleg_last_seen_seconds %.1f", sls, uls)
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(5 * time.Second) {
		active, pages := pagesNow(t, ctx, st)
		if len(pages) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("small: every message fits and the kubelet relists, yet after 3m: %v (active: %v)", pages, active)
			break
		}
	}
	quiet := time.Now()
	for until := quiet.Add(3 * time.Minute); time.Now().Before(until); time.Sleep(10 * time.Second) {
		if active, pages := pagesNow(t, ctx, st); len(pages) > 0 {
			t.Errorf("small: every message fits, yet %v (active: %v)", pages, active)
			break
		}
	}
	if l, ok := st.Kubelet.FindLog(start, "Container garbage collection failed"); ok {
		t.Errorf("small: the kubelet's container GC failed: %s", clip(l.Text, 300))
	}
	if l, ok := st.Kubelet.FindLog(quiet, logNotHealthy); ok {
		t.Errorf("small: %s", clip(l.Text, 300))
	}
	active, _ := pagesNow(t, ctx, st)
	t.Logf("small: 3 minutes with the whole answer past the limit, every message within it; active alerts at the end %v", active)
	rec.Check("small: whole answer past the limit, every message fits: no page", time.Now())
}

// overflowRestart pushes one stream message past the limit again, with
// large containers in the kubelet's own pods while it relists fine, then
// restarts it: kubelet_pleg_last_seen_seconds goes from fresh to 0. The
// long run first waits for "PLEG is not healthy", the kubelet's threshold
// with EventedPLEG on, and times the stall alert before it.
func overflowRestart(t *testing.T, ctx context.Context, st *stack.Stack, rs runtimeapi.RuntimeServiceClient, sandboxes []*testenv.Pod, long bool, rec *stack.Recording) {
	pc := &testenv.PodClient{RS: rs}
	start := time.Now()
	ids, err := fill(ctx, pc, sandboxes, "large", 20, 900<<10, false)
	if err != nil {
		t.Fatal(err)
	}
	failed, ok := st.Kubelet.WaitLog(start, 2*time.Minute, logRelistFailed, "ResourceExhausted")
	if !ok {
		t.Fatal("overflow: the kubelet's relist did not fail")
	}
	t.Logf("overflow: the relisting kubelet: %s", clip(failed.Text, 300))
	if long {
		stalled := waitAlert(t, ctx, st, "PLEGKubeletStalled", "firing", 3*time.Minute)
		notHealthy, ok := st.Kubelet.WaitLog(failed.At, 5*time.Minute, logNotHealthy)
		if !ok {
			t.Fatal("threshold: no \"PLEG is not healthy\" within 5m of the first failure")
		}
		after := notHealthy.At.Sub(failed.At)
		if after < 170*time.Second || after > 215*time.Second {
			t.Errorf("threshold with EventedPLEG: %s from the first failed relist, want about 3m", after.Round(100*time.Millisecond))
		}
		t.Logf("threshold with EventedPLEG on: PLEGKubeletStalled firing in Prometheus %s and \"PLEG is not healthy\" %s after the first failed relist: %s",
			stalled.Sub(failed.At).Round(time.Second), after.Round(100*time.Millisecond), clip(notHealthy.Text, 200))
		rec.Check("overflow in a relisting kubelet: past its threshold", time.Now())
	}
	// Restart: the gauge was fresh before the overflow, so the alert of a
	// kubelet that never relisted was quiet until now.
	if res, err := st.Query(ctx, `ALERTS{alertname="PLEGKubeletNeverRelisted"}`); err != nil || len(res) > 0 {
		t.Errorf("PLEGKubeletNeverRelisted before the restart of a kubelet that had relisted: %v (%v)", res, err)
	}
	restart := time.Now()
	if err := st.Kubelet.Restart(); err != nil {
		t.Fatal(err)
	}
	if line, ok := st.Kubelet.WaitLog(restart, time.Minute, "pleg has yet to be successful"); !ok {
		t.Errorf("the restarted kubelet never said \"pleg has yet to be successful\"")
	} else {
		t.Logf("overflow, restarted: after %s: %s", line.At.Sub(restart).Round(100*time.Millisecond), clip(line.Text, 200))
	}
	if ms, err := st.Kubelet.Metrics(); err != nil {
		t.Fatal(err)
	} else if v, ok := testenv.Gauge(ms, "kubelet_pleg_last_seen_seconds", nil); !ok || v != 0 {
		t.Errorf("kubelet_pleg_last_seen_seconds = %v (exported %v) after the restart into the overflow, want 0", v, ok)
	}
	fired := waitAlert(t, ctx, st, "PLEGKubeletNeverRelisted", "firing", 3*time.Minute)
	stalled, err := st.Query(ctx, `ALERTS{alertname="PLEGKubeletStalled"}`)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("overflow, restarted: PLEGKubeletNeverRelisted firing in Prometheus %s after the restart; PLEGKubeletStalled series left: %d (its guard: the gauge > 0)",
		fired.Sub(restart).Round(time.Second), len(stalled))
	if fired.Sub(restart) < 60*time.Second {
		t.Errorf("PLEGKubeletNeverRelisted fired %s after the restart, before its 1m for", fired.Sub(restart))
	}
	rec.Check("overflow in a relisting kubelet, restarted: PLEGKubeletNeverRelisted", time.Now())
	removed := time.Now()
	if err := removeParallel(ctx, rs, ids); err != nil {
		t.Fatal(err)
	}
	t.Logf("overflow, restarted: the kubelet's first relist %s after the large containers' removal began",
		waitRelisted(t, st).Sub(removed).Round(time.Second))
}

// waitRelisted waits up to 2 minutes for kubelet_pleg_last_seen_seconds
// to be set: the kubelet's first successful relist since it started.
func waitRelisted(t *testing.T, st *stack.Stack) time.Time {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		if ms, err := st.Kubelet.Metrics(); err == nil {
			if v, _ := testenv.Gauge(ms, "kubelet_pleg_last_seen_seconds", nil); v > 0 {
				return time.Now()
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kubelet did not relist within 2m")
		}
	}
}

// pagesNow is what is active (Alertmanager, and pending or firing in
// Prometheus), and of it the alerts that page or say the node is about
// to go NotReady. PLEGPayloadNearLimit is not one: a message near the
// limit rightly warns.
func pagesNow(t *testing.T, ctx context.Context, st *stack.Stack) (active, pages []string) {
	t.Helper()
	active, err := activeAlerts(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range active {
		for _, p := range []string{"PLEGPayloadOverLimit", "PLEGKubelet", "PLEGRelistStalled", "PLEGRuntimeDown"} {
			if strings.HasPrefix(a, p) {
				pages = append(pages, a)
			}
		}
	}
	return active, pages
}

// liveValue is the single value of an instant query on the live
// Prometheus, waiting up to a minute for it to have one.
func liveValue(t *testing.T, ctx context.Context, st *stack.Stack, q string) float64 {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		res, err := st.Query(ctx, q)
		if err == nil && len(res) == 1 {
			v, _ := res[0].Value[1].(string)
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v (%v), want one value", q, res, err)
		}
	}
}
