package e2e

import (
	"context"
	"encoding/json"
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
//   - "large": 20 never-started containers of ~900 KB, one stream message
//     past the limit. The kubelet starts into it (containerd refuses new
//     containers in the sandboxes the kubelet stops, and it stops every pod
//     it does not know, so the containers are made first), fails, is
//     restarted in it and never relists; then they are removed and it
//     relists through streaming, every second with EventedPLEG on.
//   - "small" (PLEG_E2E_LONG=1 only): 5300 more of ~3.2 KB beside them, 17 MB
//     in all, 16.1 MB in the first message. Once the large ones go, every
//     message fits though the whole answer does not: the kubelet relists and
//     nothing may page. containerd 2.4 creates them at 10–30 a second,
//     slower as they pile up: about four minutes, too long for make test's
//     budget, so it runs by hand; the series it records (RECORD_SERIES=file)
//     are the promtool test mixin/tests/recorded_streaming_test.yaml. (Not
//     many more: containerd keeps FIFOs open for every created container,
//     and past ~5500 it hits this machine's hard limit of 20000 open files,
//     which root cannot raise here.)
//
// Then churn in the kubelet's own pods, and in the long run the kubelet's
// threshold with EventedPLEG on (large containers again, until "PLEG is not
// healthy").
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
	var small, large []string
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
		if large, err = fill(ctx, pc, "stream-large", 4, 20, 900<<10); err != nil {
			return err
		}
		if long {
			// containerd holds two FIFOs open per created container and this
			// machine caps it near 10,000 open files: past ~4900 created
			// containers it refuses more. Exited ones hold none.
			if small, err = fill(ctx, pc, "stream-small", 10, 4600, 2400); err != nil {
				return err
			}
			done, err := fillExited(ctx, pc, "stream-done", 4, 700, 2400)
			if err != nil {
				return err
			}
			small = append(small, done...)
		}
		t.Logf("populated %d large and %d small never-started containers in %s", len(large), len(small), time.Since(t0).Round(time.Second))
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
	deadline, ok := t.Deadline()
	if !ok {
		deadline = time.Now().Add(30 * time.Minute)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline.Add(-3*time.Minute))
	defer cancel()
	cc, err := st.Containerd.Dial(256 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	rs := runtimeapi.NewRuntimeServiceClient(cc)
	rec := &recording{start: started}

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
	rec.check("large: the kubelet fails, the page is right", time.Now())

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
	for time.Since(zeroSince) < 30*time.Second {
		ms, err := st.Kubelet.Metrics()
		if err != nil {
			t.Fatalf("the restarted kubelet's metrics: %v", err)
		}
		if v, ok := testenv.Gauge(ms, "kubelet_pleg_last_seen_seconds", nil); !ok || v != 0 {
			t.Fatalf("kubelet_pleg_last_seen_seconds = %v (exported %v) in the overflow, want 0", v, ok)
		}
		time.Sleep(5 * time.Second)
	}
	fired := waitAlert(t, ctx, st, "PLEGKubeletNeverRelisted", "firing", 3*time.Minute)
	t.Logf("restarted: kubelet_pleg_last_seen_seconds stayed 0; PLEGKubeletNeverRelisted firing in Prometheus %s after the restart",
		fired.Sub(restart).Round(time.Second))
	if os.Getenv("RECORD_SERIES") != "" {
		// A check well inside the firing, for the recorded test.
		time.Sleep(30 * time.Second)
		rec.check("restarted into the overflow: PLEGKubeletNeverRelisted", time.Now().Add(-15*time.Second))
	}

	// 3. The large ones go. The kubelet relists, through streaming, every
	// second with EventedPLEG on; in the long run the whole answer is still
	// past the limit but every message fits, and nothing may page.
	removed := time.Now()
	if err := removeParallel(ctx, rs, large); err != nil {
		t.Fatal(err)
	}
	t.Logf("removed the %d large containers in %s", len(large), time.Since(removed).Round(100*time.Millisecond))
	var relisted time.Time
	for deadline := time.Now().Add(2 * time.Minute); relisted.IsZero(); time.Sleep(500 * time.Millisecond) {
		if ms, err := st.Kubelet.Metrics(); err == nil {
			if v, _ := testenv.Gauge(ms, "kubelet_pleg_last_seen_seconds", nil); v > 0 {
				relisted = time.Now()
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kubelet did not relist within 2m of the large containers' removal")
		}
	}
	t.Logf("the kubelet's first successful relist %s after the removal began", relisted.Sub(removed).Round(time.Second))
	if long {
		// The kubelet relisted with the whole answer past the limit: it
		// streams. Then it deletes the exited containers of pods it does not
		// know as it sees them (the pod container deletor), so the state
		// lasts seconds: what the exporter caught in it is checked.
		whole, largest = streamSizes(t, ctx, rs)
		t.Logf("small: at the kubelet's relist the whole answer was %d B (%.0f%% of the limit), the largest stream message %d B (%.0f%%)",
			whole, 100*float64(whole)/grpcLimit, largest, 100*float64(largest)/grpcLimit)
		if whole <= grpcLimit || largest >= grpcLimit {
			t.Fatalf("small: whole answer %d B, largest message %d B: want past and within the limit", whole, largest)
		}
		got = waitExporter(t, st, func(m map[string]*dto.MetricFamily) bool {
			v, _ := testenv.Gauge(m, "pleg_relist_stream_message_max_bytes", map[string]string{"rpc": "ListContainers"})
			p, _ := testenv.Gauge(m, "pleg_relist_payload_bytes", map[string]string{"rpc": "ListContainers"})
			return v > 0 && v < grpcLimit && p > grpcLimit
		})
		msg, _ = testenv.Gauge(got, "pleg_relist_stream_message_max_bytes", map[string]string{"rpc": "ListContainers"})
		pay, _ = testenv.Gauge(got, "pleg_relist_payload_bytes", map[string]string{"rpc": "ListContainers"})
		fb, _ := testenv.Gauge(got, "pleg_relist_fallback", nil)
		t.Logf("small: the exporter: payload %.0f B, largest stream message %.0f B, fallback %.0f, %.0f containers counted through streaming",
			pay, msg, fb, exporterContainers(got))
	}
	// The kubelet's relists: last seen fresh over 20 s, a 1 s period. In
	// the long run the kubelet first inspects and deletes the exited
	// containers of pods it does not know, relisting slowly meanwhile:
	// windows are measured until one is steady, for up to 4 minutes.
	for tries, since := 1, time.Now(); ; tries++ {
		var w relistWindow
		w, ms = relists(t, st, 20*time.Second)
		ok := w.worst <= 5 && w.n >= 10 && w.period <= 2
		if ok || !long || time.Since(since) > 4*time.Minute {
			if !ok {
				t.Errorf("the streaming kubelet's last seen reached %.0f s, %.0f relists in 20 s, mean interval %.2f s", w.worst, w.n, w.period)
			}
			t.Logf("EventedPLEG on: the kubelet relisted %.0f times in 20 s, mean interval %.2f s, mean relist %.0f ms; time() - kubelet_pleg_last_seen_seconds at most %.0f s (window %d, %s after the removal)",
				w.n, w.period, 1000*w.meanRelist, w.worst, tries, time.Since(removed).Round(time.Second))
			break
		}
		t.Logf("the kubelet relisted %.0f times in 20 s, mean relist %.0f ms, last seen up to %.0f s old: not steady yet", w.n, 1000*w.meanRelist, w.worst)
	}
	if evented := evented(ms); evented != "" {
		t.Logf("EventedPLEG on: the kubelet's evented metrics: %s", evented)
	}
	// The pages of the overflow resolve, and none comes back. (In the long
	// run the largest message is near the limit: PLEGPayloadNearLimit may
	// be pending, rightly.)
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(5 * time.Second) {
		active, err := activeAlerts(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		var pages []string
		for _, a := range active {
			for _, p := range []string{"PLEGPayloadOverLimit", "PLEGKubelet", "PLEGRelistStalled", "PLEGRuntimeDown"} {
				if strings.HasPrefix(a, p) {
					pages = append(pages, a)
				}
			}
		}
		if len(pages) == 0 {
			t.Logf("relisting through streaming: active alerts %v", active)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kubelet relists through streaming, yet after 2m: %v", pages)
		}
	}
	rec.check("relisting through streaming: no page", time.Now())

	// 4. Churn in the kubelet's own pods.
	sandboxes := churn(t, ctx, st, rs)

	// 5. The threshold with EventedPLEG on (long run): one message past
	// the limit again, until the kubelet says PLEG is not healthy.
	if long {
		threshold(t, ctx, st, rs, sandboxes)
	}
	if path := os.Getenv("RECORD_SERIES"); path != "" {
		rec.write(t, ctx, st, path)
	}
}

// fill makes n never-started containers with a pad-byte annotation in pods
// of namespace ns, eight at a time.
func fill(ctx context.Context, pc *testenv.PodClient, ns string, pods, n, pad int) ([]string, error) {
	var ps []*testenv.Pod
	for i := 0; i < pods; i++ {
		p, err := pc.RunPod(ctx, ns, fmt.Sprintf("%s-%d", ns, i))
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	annotation := map[string]string{"example.com/payload": strings.Repeat("s", pad)}
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				id, err := pc.CreateContainer(ctx, ps[i%len(ps)], testenv.ContainerSpec{Name: "left", Attempt: uint32(i), ExtraAnnotations: annotation})
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

// fillExited is fill with containers that ran /bin/true and exited.
func fillExited(ctx context.Context, pc *testenv.PodClient, ns string, pods, n, pad int) ([]string, error) {
	var ps []*testenv.Pod
	for i := 0; i < pods; i++ {
		p, err := pc.RunPod(ctx, ns, fmt.Sprintf("%s-%d", ns, i))
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	annotation := map[string]string{"example.com/payload": strings.Repeat("d", pad)}
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 4 {
				id, err := pc.CreateContainer(ctx, ps[i%len(ps)], testenv.ContainerSpec{Name: "done", Attempt: uint32(i),
					Command: []string{"/bin/true"}, Start: true, ExtraAnnotations: annotation})
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
	q0, qs0, _ := histogram(kms, "kubelet_pleg_relist_duration_seconds", 1)
	time.Sleep(window)
	before, err := scrapeExporter(st)
	if err != nil {
		t.Fatal(err)
	}
	kms, _ = st.Kubelet.Metrics()
	n0, s0, _ := histogram(kms, "kubelet_pleg_relist_duration_seconds", 1)
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
	n1, s1, _ := histogram(kms, "kubelet_pleg_relist_duration_seconds", 1)
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
	n0, s0, _ := histogram(ms, "kubelet_pleg_relist_interval_seconds", 2)
	d0, ds0, _ := histogram(ms, "kubelet_pleg_relist_duration_seconds", 1)
	var w relistWindow
	for t1 := time.Now(); time.Since(t1) < window; time.Sleep(time.Second) {
		if ms, err = st.Kubelet.Metrics(); err != nil {
			t.Fatal(err)
		}
		v, _ := testenv.Gauge(ms, "kubelet_pleg_last_seen_seconds", nil)
		w.worst = max(w.worst, float64(time.Now().Unix())-v)
	}
	n1, s1, _ := histogram(ms, "kubelet_pleg_relist_interval_seconds", 2)
	d1, ds1, _ := histogram(ms, "kubelet_pleg_relist_duration_seconds", 1)
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

// threshold pushes one stream message past the limit again, with large
// containers in the kubelet's own (running) pods, and times the kubelet's
// "PLEG is not healthy" from its first failed relist: its threshold with
// EventedPLEG on.
func threshold(t *testing.T, ctx context.Context, st *stack.Stack, rs runtimeapi.RuntimeServiceClient, sandboxes []*testenv.Pod) {
	pc := &testenv.PodClient{RS: rs}
	start := time.Now()
	pad := map[string]string{"example.com/payload": strings.Repeat("l", 900<<10)}
	var ids []string
	for i := 0; i < 20; i++ {
		id, err := pc.CreateContainer(ctx, sandboxes[i%len(sandboxes)], testenv.ContainerSpec{Name: "large", Attempt: uint32(i), ExtraAnnotations: pad})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	failed, ok := st.Kubelet.WaitLog(start, 2*time.Minute, logRelistFailed, "ResourceExhausted")
	if !ok {
		t.Fatal("threshold: the kubelet's relist did not fail")
	}
	notHealthy, ok := st.Kubelet.WaitLog(failed.At, 5*time.Minute, logNotHealthy)
	if !ok {
		t.Fatal("threshold: no \"PLEG is not healthy\" within 5m of the first failure")
	}
	after := notHealthy.At.Sub(failed.At)
	if after < 170*time.Second || after > 215*time.Second {
		t.Errorf("threshold with EventedPLEG: %s from the first failed relist, want about 3m", after.Round(100*time.Millisecond))
	}
	t.Logf("threshold with EventedPLEG on: \"PLEG is not healthy\" %s after the first failed relist: %s", after.Round(100*time.Millisecond), clip(notHealthy.Text, 200))
	removeParallel(ctx, rs, ids)
}

// recording keeps the moments whose firing alerts a promtool test of the
// recorded series must reproduce.
type recording struct {
	start  time.Time
	checks []recordedCheck
}

type recordedCheck struct {
	name string
	at   time.Time
}

func (r *recording) check(name string, at time.Time) {
	r.checks = append(r.checks, recordedCheck{name, at})
}

// recordedSeries are the inputs of the mixin's rules: the exporter's
// series but its histograms, and the kubelet's PLEG gauges and gates.
var recordedSeries = []string{
	`{job="pleg-exporter", __name__=~"pleg_.*", __name__!~".*_bucket|.*_sum|.*_count"}`,
	`{job="kubelet", __name__=~"kubelet_pleg_last_seen_seconds|kubelet_pleg_relist_interval_seconds_bucket"}`,
	`kubernetes_feature_enabled{job="kubelet", name=~"CRIListStreaming|EventedPLEG"}`,
	`up`,
}

const recordedAlerts = `count by (alertname, severity) (ALERTS{alertstate="firing"})`

// write turns what Prometheus scraped during the test into a promtool test:
// every series at its 15 s evaluation steps ("_" where it had none), and at
// each check the alerts the live Prometheus had firing then.
func (r *recording) write(t *testing.T, ctx context.Context, st *stack.Stack, path string) {
	t.Helper()
	const step = 15 * time.Second
	start := r.start.Truncate(step)
	end := time.Now()
	steps := int(end.Sub(start)/step) + 1
	type input struct {
		Series string `json:"series"`
		Values string `json:"values"`
	}
	var inputs []input
	for _, q := range recordedSeries {
		res, err := st.QueryRange(ctx, q, start, end, step)
		if err != nil {
			t.Fatalf("record %s: %v", q, err)
		}
		for _, s := range res {
			vals := make([]string, steps)
			for i := range vals {
				vals[i] = "_"
			}
			for _, v := range s.Values {
				ts, _ := v[0].(float64)
				i := int((time.Unix(int64(ts), 0).Sub(start) + step/2) / step)
				if i >= 0 && i < steps {
					vals[i], _ = v[1].(string)
				}
			}
			inputs = append(inputs, input{Series: seriesName(s.Metric), Values: strings.Join(vals, " ")})
		}
	}
	sort.Slice(inputs, func(i, j int) bool { return inputs[i].Series < inputs[j].Series })
	type sample struct {
		Labels string  `json:"labels"`
		Value  float64 `json:"value"`
	}
	type exprTest struct {
		Expr     string   `json:"expr"`
		EvalTime string   `json:"eval_time"`
		Samples  []sample `json:"exp_samples"`
	}
	var tests []exprTest
	var names []string
	for _, c := range r.checks {
		at := start.Add(c.at.Sub(start).Truncate(step))
		res, err := st.QueryAt(ctx, recordedAlerts, at)
		if err != nil {
			t.Fatalf("record %s: %v", c.name, err)
		}
		samples := []sample{}
		for _, s := range res {
			samples = append(samples, sample{Labels: fmt.Sprintf("{alertname=%q, severity=%q}", s.Metric["alertname"], s.Metric["severity"]), Value: 1})
			if v, _ := s.Value[1].(string); v != "1" {
				samples[len(samples)-1].Value, _ = strconv.ParseFloat(v, 64)
			}
		}
		sort.Slice(samples, func(i, j int) bool { return samples[i].Labels < samples[j].Labels })
		tests = append(tests, exprTest{Expr: recordedAlerts, EvalTime: at.Sub(start).String(), Samples: samples})
		names = append(names, fmt.Sprintf("%s at %s", c.name, at.Sub(start)))
	}
	file := map[string]any{
		"rule_files":          []string{"../generated/prometheus_rules.yaml", "../generated/prometheus_alerts.yaml"},
		"evaluation_interval": "15s",
		"group_eval_order":    []string{"pleg-exporter.rules", "pleg-exporter", "pleg-kubelet"},
		"tests": []map[string]any{{
			"name":             "recorded on a real kubelet v1.37.2 with CRIListStreaming and EventedPLEG on containerd " + testenv.Containerd2Version + " (TestKubeletStreaming, PLEG_E2E_LONG=1): " + strings.Join(names, "; "),
			"interval":         "15s",
			"input_series":     inputs,
			"promql_expr_test": tests,
		}},
	}
	b, err := json.MarshalIndent(file, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	header := "# Generated by TestKubeletStreaming with PLEG_E2E_LONG=1 RECORD_SERIES=<this file>: the series\n" +
		"# Prometheus scraped from the exporter and a real kubelet, and the alerts it had firing at each check.\n"
	if err := os.WriteFile(path, append([]byte(header), append(b, '\n')...), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %d series over %s and %d checks into %s", len(inputs), end.Sub(start).Round(time.Second), len(tests), path)
}

// seriesName writes a series selector in promtool's input notation.
func seriesName(m map[string]string) string {
	name := m["__name__"]
	var keys []string
	for k := range m {
		if k != "__name__" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%q", k, m[k]))
	}
	return name + "{" + strings.Join(parts, ", ") + "}"
}
