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
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// find returns the first event after since that matches, if there is one.
func (r *receiver) find(since time.Time, match func(event) bool) (event, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if !e.at.Before(since) && match(e) {
			return e, true
		}
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

func TestMain(m *testing.M) {
	// A kubelet, its pods, mounts, cgroups and sysctls left by a killed run.
	testenv.CleanLeftoversOrExit()
	os.Exit(m.Run())
}

// unavailable skips outside CI when a component cannot run here, with the
// reason; in CI, where make test installs and builds everything, it fails.
func unavailable(t *testing.T, err error) {
	t.Helper()
	if os.Getenv("CI") != "" || !errors.Is(err, testenv.ErrUnavailable) {
		t.Fatal(err)
	}
	t.Skipf("skipping: %v", err)
}

// The kubelet's PLEG threshold (genericPlegRelistThreshold).
const plegThreshold = 180 * time.Second

// The kubelet's own log lines.
const (
	logRelistFailed = "GenericPLEG: Unable to retrieve pods"
	logNotHealthy   = "PLEG is not healthy"
)

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// relistInterval is the stack exporter's --relist.interval (its default).
const relistInterval = 10 * time.Second

// The whole chain under a real kubelet: testenv.KubeletVersion in standalone mode on
// the private containerd (which also runs its static pods), the exporter
// beside it, Prometheus scraping both with the rendered mixin, Alertmanager
// routed to a webhook here.
func TestEndToEnd(t *testing.T) {
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
	dir, err := os.MkdirTemp("", "pleg-e2e")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	t0 := time.Now()
	bin := buildExporter(t)
	st, err := stack.Start(stack.Options{
		Dir: dir, ExporterBinary: bin, RulesDir: filepath.Join(repo, "mixin", "generated"),
		ReceiverURL: hook.URL, WithDocker: true, Log: testLog{t}, RelistInterval: relistInterval.String(),
		Kubelet: kubeletBin, MinContainerTTL: 24 * time.Hour, BeforeKubelet: leftBehind,
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
	t.Logf("stack with kubelet %s up in %s", testenv.KubeletVersion, time.Since(t0).Round(time.Second))
	ctx, rs := runtimeClient(t, st)
	if err := startStaticPods(ctx, st, rs); err != nil {
		t.Fatal(err)
	}
	if err := dockerSidecar(ctx, st); err != nil {
		t.Fatal(err)
	}

	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"agreement at rest", func(t *testing.T) { agreement(t, ctx, st, rs) }},
		{"dashboards", func(t *testing.T) { checkDashboards(t, ctx, st) }},
		// The freeze and the overflow, and the exporter as a pod, run in
		// a cluster (internal/cluster), timed against the Node object.
	}
	for _, s := range steps {
		// Each step starts from a quiet node: no alert firing.
		t0 := time.Now()
		if err := waitQuiet(ctx, st, 5*time.Minute); err != nil {
			t.Fatalf("before %s: %v", s.name, err)
		}
		t1 := time.Now()
		ok := t.Run(s.name, s.run)
		// Where make test's time goes.
		t.Logf("step %q: %s, after %s waiting for a quiet node", s.name, time.Since(t1).Round(time.Second), t1.Sub(t0).Round(time.Second))
		if !ok {
			return // the node is in an unknown state; later steps would only fail for it
		}
	}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// leftBehind is what a node collects from pods that went away, made before
// the kubelet starts: 20 pods the kubelet does not know with 26 containers
// each that never started (520). The kubelet stops their sandboxes at once
// and would delete exited containers of such pods as it sees them die, but
// leaves created ones; --minimum-container-ttl-duration keeps its container
// GC off them.
func leftBehind(c *testenv.Containerd) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cc, err := c.Dial(256 << 20)
	if err != nil {
		return err
	}
	defer cc.Close()
	pc := &testenv.PodClient{RS: runtimeapi.NewRuntimeServiceClient(cc), LogDir: filepath.Join(c.Dir, "pod-logs")}
	for i := 0; i < 20; i++ {
		pod, err := pc.RunPod(ctx, []string{"batch-jobs", "reports"}[i%2], fmt.Sprintf("nightly-2921%04d", i))
		if err != nil {
			return err
		}
		for a := uint32(0); a < 26; a++ {
			spec := testenv.ContainerSpec{Name: "job", Attempt: a, Command: []string{"/bin/true"}}
			if _, err := pc.CreateContainer(ctx, pod, spec); err != nil {
				return err
			}
		}
	}
	return nil
}

// The kubelet's own static pods: one running container, and a pod whose
// init container has finished.
func startStaticPods(ctx context.Context, st *stack.Stack, rs runtimeapi.RuntimeServiceClient) error {
	grace := int64(1)
	sleep := []string{"/bin/sleep", "100000"}
	pods := []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: corev1.PodSpec{
			HostNetwork: true, TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "app", Image: testenv.Image, Command: sleep}},
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "queue", Namespace: "default"}, Spec: corev1.PodSpec{
			HostNetwork: true, TerminationGracePeriodSeconds: &grace,
			InitContainers: []corev1.Container{{Name: "migrate", Image: testenv.Image, Command: []string{"/bin/true"}}},
			Containers: []corev1.Container{
				{Name: "worker", Image: testenv.Image, Command: sleep},
				{Name: "metrics", Image: testenv.Image, Command: sleep},
			},
		}},
	}
	for _, p := range pods {
		if err := st.Kubelet.WriteStaticPod(p); err != nil {
			return err
		}
	}
	// Three running containers of static pods (<name>-<node>).
	for {
		resp, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
			State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		}})
		if err == nil && len(resp.GetContainers()) >= 3 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the kubelet did not start its static pods: %v", err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// dockerSidecar gives the Docker view (and its dashboard panels) a
// container.
func dockerSidecar(ctx context.Context, st *stack.Stack) error {
	resp, err := st.Dockerd.API.ContainerCreate(ctx, &container.Config{Image: testenv.Image}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "sidecar")
	if err != nil {
		return err
	}
	return st.Dockerd.API.ContainerStart(ctx, resp.ID, container.StartOptions{})
}

// Every query of every panel runs against the live Prometheus without an
// error, and every panel shows data.
func checkDashboards(t *testing.T, ctx context.Context, st *stack.Stack) {
	// rate() needs two scrapes in its window; the recording rules one
	// evaluation, those of the slow group (every minute) too.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		r, err := st.Query(ctx, `rate(pleg_relists_total[1m]) > 0 and on() count(instance:pleg_relist_payload_bytes:max_ratio_limit) > 0 and on() count(node:pleg_containers_exited_unknown:top10_sum) > 0 and on() count(rate(pleg_status_probe_duration_seconds_count[1m]) > 0) > 0`)
		if err == nil && len(r) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus has no rated data after 3m: %v", err)
		}
		time.Sleep(time.Second)
	}
	files, _ := filepath.Glob(filepath.Join(repo, "dashboards", "*.json"))
	panels, err := st.API().RunDashboards(ctx, files, map[string]string{"node": stack.Node, "cluster": "", "__rate_interval": "1m"})
	if err != nil {
		t.Fatal(err)
	}
	queries, _, problems := stack.CheckPanels(panels, nil)
	for _, p := range problems {
		t.Error(p)
	}
	t.Logf("dashboards: %d panels, %d queries run against the live Prometheus, every panel has data", len(panels), queries)
	if len(panels) < 15 {
		t.Errorf("only %d panels checked", len(panels))
	}
}

func plegAlert(name string) func(event) bool {
	return func(e event) bool {
		return e.status == "firing" && strings.HasPrefix(e.labels["alertname"], name)
	}
}

// runtimeClient is a CRI client of the stack's containerd, closed when the
// test ends, and the test's context: every wait ends 3 minutes before go
// test's own deadline, which would panic past the deferred teardown (the
// next run would clean up, but this one should).
func runtimeClient(t *testing.T, st *stack.Stack) (context.Context, runtimeapi.RuntimeServiceClient) {
	t.Helper()
	deadline, ok := t.Deadline()
	if !ok {
		deadline = time.Now().Add(30 * time.Minute)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline.Add(-3*time.Minute))
	t.Cleanup(cancel)
	cc, err := st.Containerd.Dial(256 << 20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return ctx, runtimeapi.NewRuntimeServiceClient(cc)
}
