package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/internal/stack"
	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
)

const repo = "../.."

// receiver records every alert notification Alertmanager sends.
type receiver struct {
	mu     sync.Mutex
	events []event
}

type event struct {
	at     time.Time
	status string // firing or resolved
	labels map[string]string
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var msg struct {
		Alerts []struct {
			Status string            `json:"status"`
			Labels map[string]string `json:"labels"`
		} `json:"alerts"`
	}
	if err := json.NewDecoder(req.Body).Decode(&msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, a := range msg.Alerts {
		r.events = append(r.events, event{at: time.Now(), status: a.Status, labels: a.Labels})
	}
	r.mu.Unlock()
}

// wait returns the first event after since that matches.
func (r *receiver) wait(t *testing.T, since time.Time, timeout time.Duration, match func(event) bool) (event, bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		for _, e := range r.events {
			if !e.at.Before(since) && match(e) {
				r.mu.Unlock()
				return e, true
			}
		}
		r.mu.Unlock()
		time.Sleep(250 * time.Millisecond)
	}
	return event{}, false
}

func buildExporter(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pleg_exporter")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/pleg_exporter").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

func TestEndToEnd(t *testing.T) {
	if err := stack.Check(); err != nil {
		if os.Getenv("CI") != "" || !errors.Is(err, testenv.ErrUnavailable) {
			t.Fatal(err)
		}
		t.Skipf("skipping: %v", err)
	}
	rec := &receiver{}
	hook := httptest.NewServer(rec) // loopback only
	defer hook.Close()
	dir, err := os.MkdirTemp("", "pleg-e2e")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := stack.Start(stack.Options{
		Dir: dir, ExporterBinary: buildExporter(t), RulesDir: filepath.Join(repo, "mixin", "generated"),
		ReceiverURL: hook.URL, WithDocker: true, Log: testLog{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	kubelet, closeCRI := criKubelet(t, st)
	defer closeCRI()
	populate(t, ctx, kubelet, st)

	t.Run("dashboards", func(t *testing.T) { checkDashboards(t, ctx, st) })
	t.Run("frozen runtime", func(t *testing.T) { frozen(t, st, rec) })
	t.Run("payload overflow", func(t *testing.T) { overflow(t, ctx, st, rec, kubelet) })
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func criKubelet(t *testing.T, st *stack.Stack) (*testenv.PodClient, func()) {
	cc, err := st.Containerd.Dial(256 << 20)
	if err != nil {
		t.Fatal(err)
	}
	return &testenv.PodClient{RS: runtimeapi.NewRuntimeServiceClient(cc), LogDir: filepath.Join(st.Containerd.Dir, "pods")}, func() { cc.Close() }
}

func populate(t *testing.T, ctx context.Context, k *testenv.PodClient, st *stack.Stack) {
	for i, ns := range []string{"default", "batch-jobs"} {
		pod, err := k.RunPod(ctx, ns, fmt.Sprintf("e2e%d-0", i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.CreateContainer(ctx, pod, testenv.ContainerSpec{Name: "app", Start: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := k.CreateContainer(ctx, pod, testenv.ContainerSpec{Name: "job", Command: []string{"/bin/true"}, Start: true}); err != nil {
			t.Fatal(err)
		}
	}
	// A finished pod: a notready sandbox the exporter's status probes check.
	done, err := k.RunPod(ctx, "batch-jobs", "cron-29218680-tzdzg")
	if err != nil {
		t.Fatal(err)
	}
	if err := k.StopPod(ctx, done); err != nil {
		t.Fatal(err)
	}
	resp, err := st.Dockerd.API.ContainerCreate(ctx, &container.Config{Image: testenv.Image}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "sidecar")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Dockerd.API.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
}

var varRE = regexp.MustCompile(`\$\{?(node|cluster|__rate_interval)\}?`)

// Every query of every panel runs against the live Prometheus without an
// error, and every panel shows data.
func checkDashboards(t *testing.T, ctx context.Context, st *stack.Stack) {
	// rate() needs two scrapes in its window; the recording rules one evaluation.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		r, err := st.Query(ctx, `rate(pleg_relists_total[1m]) > 0 and on() count(instance:pleg_relist_payload_bytes:max_ratio_limit) > 0 and on() count(rate(pleg_status_probe_duration_seconds_count[1m]) > 0) > 0`)
		if err == nil && len(r) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus has no rated data after 3m: %v", err)
		}
		time.Sleep(time.Second)
	}
	files, _ := filepath.Glob(filepath.Join(repo, "dashboards", "*.json"))
	queries, panels := 0, 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Panels []struct {
				Title   string `json:"title"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatal(err)
		}
		for _, p := range d.Panels {
			panels++
			withData := 0
			for _, q := range p.Targets {
				queries++
				expr := varRE.ReplaceAllStringFunc(q.Expr, func(v string) string {
					switch strings.Trim(v, "${}") {
					case "node":
						return stack.Node
					case "__rate_interval":
						return "1m"
					}
					return ""
				})
				res, err := st.Query(ctx, expr)
				if err != nil {
					t.Errorf("%s / %q: query error: %v\n%s", filepath.Base(f), p.Title, err, expr)
					continue
				}
				if len(res) > 0 {
					withData++
				}
			}
			if withData == 0 {
				t.Errorf("%s / %q: no query returns data", filepath.Base(f), p.Title)
			}
		}
	}
	t.Logf("dashboards: %d panels, %d queries run against the live Prometheus, every panel has data", panels, queries)
	if panels < 15 {
		t.Errorf("only %d panels checked", panels)
	}
}

func plegAlert(name string) func(event) bool {
	return func(e event) bool {
		return e.status == "firing" && strings.HasPrefix(e.labels["alertname"], name)
	}
}

func frozen(t *testing.T, st *stack.Stack, rec *receiver) {
	t0 := time.Now()
	if err := st.Containerd.Freeze(); err != nil {
		t.Fatal(err)
	}
	thawed := false
	defer func() {
		if !thawed {
			st.Containerd.Thaw()
		}
	}()
	e, ok := rec.wait(t, t0, 170*time.Second, plegAlert("PLEG"))
	if !ok {
		t.Fatal("no PLEG alert reached the webhook within 170s of the freeze")
	}
	arrival := e.at.Sub(t0)
	t.Logf("frozen runtime: first alert %s (%s) reached the webhook %s after SIGSTOP; the kubelet would mark the node NotReady at 180s: lead time %s",
		e.labels["alertname"], e.labels["severity"], arrival.Round(time.Second), (180*time.Second - arrival).Round(time.Second))
	if arrival >= 120*time.Second {
		t.Errorf("first alert after %s, want < 120s", arrival)
	}
	if err := st.Containerd.Thaw(); err != nil {
		t.Fatal(err)
	}
	thawed = true
	t1 := time.Now()
	r, ok := rec.wait(t, t1, 4*time.Minute, func(x event) bool {
		return x.status == "resolved" && x.labels["alertname"] == e.labels["alertname"] && x.labels["severity"] == e.labels["severity"]
	})
	if !ok {
		t.Fatalf("%s did not resolve within 4m of SIGCONT", e.labels["alertname"])
	}
	t.Logf("frozen runtime: %s resolved %s after SIGCONT", e.labels["alertname"], r.at.Sub(t1).Round(time.Second))
}

func overflow(t *testing.T, ctx context.Context, st *stack.Stack, rec *receiver, k *testenv.PodClient) {
	pod, err := k.RunPod(ctx, "leaky-ns", "leaky-cron-0")
	if err != nil {
		t.Fatal(err)
	}
	pod2, err := k.RunPod(ctx, "leaky-ns", "leaky-cron-1")
	if err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("p", 64<<10)
	var ids []string
	defer func() {
		for _, id := range ids {
			k.RemoveContainer(context.Background(), id)
		}
	}()
	var crossed time.Time
	for crossed.IsZero() {
		for i := 0; i < 16; i++ {
			p := pod
			if len(ids)%2 == 1 {
				p = pod2
			}
			id, err := k.CreateContainer(ctx, p, testenv.ContainerSpec{Name: "leak", Attempt: uint32(len(ids)), ExtraAnnotations: map[string]string{"example.com/payload": pad}})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		// The kubelet's own view: the unfiltered list now fails for size.
		if _, err := k.RS.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{}}); err != nil && strings.Contains(err.Error(), "larger than max") {
			crossed = time.Now()
			t.Logf("payload overflow: ListContainers passed 16 MiB with %d padded containers: %v", len(ids), err)
		}
	}
	e, ok := rec.wait(t, crossed.Add(-time.Second), 3*time.Minute, plegAlert("PLEGPayloadOverLimit"))
	if !ok {
		t.Fatal("PLEGPayloadOverLimit did not reach the webhook within 3m of the crossing")
	}
	after := e.at.Sub(crossed)
	t.Logf("payload overflow: PLEGPayloadOverLimit reached the webhook %s after the crossing (the kubelet's threshold is 180s)", after.Round(time.Second))
	if after >= 180*time.Second {
		t.Errorf("alert after %s, want < 180s", after)
	}
}
