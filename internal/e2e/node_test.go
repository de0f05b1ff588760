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
	"fmt"
	"math"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/internal/stack"
	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
)

// grpcLimit is the kubelet's CRI receive limit (and containerd's send limit).
const grpcLimit = 16 << 20

// view is the runtime's own answer to the kubelet's two relist calls.
type view struct {
	containers     map[string]float64 // by kubelet container_state
	sandboxes      map[string]float64 // ready, notready
	containerBytes float64
	sandboxBytes   float64
	total          int
}

func (v view) String() string {
	return fmt.Sprintf("containers %v (%d, %d bytes), sandboxes %v (%d bytes)", v.containers, v.total, int(v.containerBytes), v.sandboxes, int(v.sandboxBytes))
}

func (v view) equal(o view) bool { return v.String() == o.String() }

var stateName = map[runtimeapi.ContainerState]string{
	runtimeapi.ContainerState_CONTAINER_CREATED: "created",
	runtimeapi.ContainerState_CONTAINER_RUNNING: "running",
	runtimeapi.ContainerState_CONTAINER_EXITED:  "exited",
	runtimeapi.ContainerState_CONTAINER_UNKNOWN: "unknown",
}

var sizeRE = regexp.MustCompile(`larger than max \((\d+) vs\. \d+\)`)

// runtimeView asks the runtime, unfiltered like the kubelet's relist, with a
// receive limit far above 16 MiB. Past containerd's own 16 MiB send limit
// the answer's size is the one containerd's error states, and the
// containers are counted sandbox by sandbox.
func runtimeView(ctx context.Context, rs runtimeapi.RuntimeServiceClient) (view, error) {
	v := view{containers: map[string]float64{}, sandboxes: map[string]float64{}}
	ss, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return v, err
	}
	cs, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	switch {
	case err == nil:
		v.containerBytes = float64(proto.Size(cs))
	case status.Code(err) == codes.ResourceExhausted && sizeRE.MatchString(err.Error()):
		n, _ := strconv.Atoi(sizeRE.FindStringSubmatch(err.Error())[1])
		v.containerBytes = float64(n)
		cs = &runtimeapi.ListContainersResponse{}
		for _, s := range ss.GetItems() {
			part, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: s.GetId()}})
			if err != nil {
				return v, err
			}
			cs.Containers = append(cs.Containers, part.GetContainers()...)
		}
	default:
		return v, err
	}
	for _, c := range cs.GetContainers() {
		v.containers[stateName[c.GetState()]]++
	}
	v.total = len(cs.GetContainers())
	for _, s := range ss.GetItems() {
		if s.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			v.sandboxes["ready"]++
		} else {
			v.sandboxes["notready"]++
		}
	}
	v.sandboxBytes = float64(proto.Size(ss))
	return v, nil
}

// stableView is the runtime's answer when two asks in a row agree, with
// whatever fn scraped in between.
func stableView(ctx context.Context, rs runtimeapi.RuntimeServiceClient, fn func() error) (view, error) {
	a, err := runtimeView(ctx, rs)
	if err != nil {
		return a, err
	}
	if err := fn(); err != nil {
		return a, err
	}
	b, err := runtimeView(ctx, rs)
	if err != nil {
		return b, err
	}
	if !a.equal(b) {
		return b, fmt.Errorf("the runtime changed while scraping: %v, then %v", a, b)
	}
	return b, nil
}

func scrapeExporter(st *stack.Stack) (map[string]*dto.MetricFamily, error) {
	return testenv.ScrapeMetrics(st.Exporter.URL() + "/metrics")
}

// exporterDiff says how the exporter's view differs from the runtime's.
func exporterDiff(ms map[string]*dto.MetricFamily, v view) []string {
	var out []string
	got := testenv.ByLabel(ms, "pleg_containers", "state")
	for _, s := range []string{"created", "running", "exited", "unknown"} {
		if got[s] != v.containers[s] {
			out = append(out, fmt.Sprintf("pleg_containers{state=%q} %v, the runtime %v", s, got[s], v.containers[s]))
		}
	}
	sb := testenv.ByLabel(ms, "pleg_sandboxes", "state")
	for _, s := range []string{"ready", "notready"} {
		if sb[s] != v.sandboxes[s] {
			out = append(out, fmt.Sprintf("pleg_sandboxes{state=%q} %v, the runtime %v", s, sb[s], v.sandboxes[s]))
		}
	}
	pb := testenv.ByLabel(ms, "pleg_relist_payload_bytes", "rpc")
	if pb["ListContainers"] != v.containerBytes {
		out = append(out, fmt.Sprintf("pleg_relist_payload_bytes{rpc=\"ListContainers\"} %v, the answer %v bytes", pb["ListContainers"], v.containerBytes))
	}
	if pb["ListPodSandbox"] != v.sandboxBytes {
		out = append(out, fmt.Sprintf("pleg_relist_payload_bytes{rpc=\"ListPodSandbox\"} %v, the answer %v bytes", pb["ListPodSandbox"], v.sandboxBytes))
	}
	return out
}

// kubeletDiff says how the kubelet's kubelet_running_containers (every
// state it reports) and kubelet_running_pods differ from the runtime's.
func kubeletDiff(ms map[string]*dto.MetricFamily, v view) []string {
	var out []string
	got := testenv.ByLabel(ms, "kubelet_running_containers", "container_state")
	for s, n := range got {
		if n != v.containers[s] {
			note := ""
			if v.containers[s] == 0 {
				note = " (the kubelet never resets a state whose count drops to zero)"
			}
			out = append(out, fmt.Sprintf("kubelet_running_containers{container_state=%q} %v, the runtime %v%s", s, n, v.containers[s], note))
		}
	}
	for s, n := range v.containers {
		if _, ok := got[s]; !ok && n > 0 {
			out = append(out, fmt.Sprintf("the kubelet reports no %s containers, the runtime %v", s, n))
		}
	}
	if pods, _ := testenv.Gauge(ms, "kubelet_running_pods", nil); pods != v.sandboxes["ready"] {
		out = append(out, fmt.Sprintf("kubelet_running_pods %v, ready sandboxes %v", pods, v.sandboxes["ready"]))
	}
	return out
}

// Agreement at rest: the exporter's counts and payload bytes are the
// runtime's own, and its counts are the kubelet's for every state the
// kubelet reports; its last-seen age is the kubelet's within one interval.
func agreement(t *testing.T, ctx context.Context, st *stack.Stack, rs runtimeapi.RuntimeServiceClient) {
	deadline := time.Now().Add(3 * time.Minute)
	var last []string
	for {
		var exp, kub map[string]*dto.MetricFamily
		v, err := stableView(ctx, rs, func() (err error) {
			if exp, err = scrapeExporter(st); err != nil {
				return err
			}
			kub, err = st.Kubelet.Metrics()
			return err
		})
		if err == nil {
			last = append(exporterDiff(exp, v), kubeletDiff(kub, v)...)
			if len(last) == 0 {
				t.Logf("agreement at rest: %d containers %v, %d sandboxes %v: pleg_containers and kubelet_running_containers equal the runtime's answer; pleg_relist_payload_bytes %d (ListContainers) and %d (ListPodSandbox) equal its exact size",
					v.total, v.containers, int(v.sandboxes["ready"]+v.sandboxes["notready"]), v.sandboxes, int(v.containerBytes), int(v.sandboxBytes))
				if v.total < 500 || v.containers["running"] < 3 {
					t.Errorf("only %d containers (%v running), want at least 500 with the static pods' running ones", v.total, v.containers["running"])
				}
				break
			}
		} else {
			last = []string{err.Error()}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no agreement within 3m:\n%s", strings.Join(last, "\n"))
		}
		time.Sleep(time.Second)
	}

	// Last-seen: the exporter's age against the kubelet's, read together.
	for i := 0; i < 3; i++ {
		exp, err := scrapeExporter(st)
		if err != nil {
			t.Fatal(err)
		}
		kub, err := st.Kubelet.Metrics()
		now := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		ours, _ := testenv.Gauge(exp, "pleg_last_seen_seconds", nil)
		seen, _ := testenv.Gauge(kub, "kubelet_pleg_last_seen_seconds", nil)
		theirs := float64(now.UnixNano())/1e9 - seen
		t.Logf("last seen: pleg_last_seen_seconds %.1f s, time() - kubelet_pleg_last_seen_seconds %.1f s", ours, theirs)
		// One interval, and 2 s for the relist and scrape themselves and the
		// kubelet's gauge, which holds whole seconds.
		if math.Abs(ours-theirs) > relistInterval.Seconds()+2 {
			t.Errorf("pleg_last_seen_seconds %.1f s and the kubelet's %.1f s differ by more than one relist interval (%s)", ours, theirs, relistInterval)
		}
		time.Sleep(3 * time.Second)
	}
}

// amAlert is an alert as Alertmanager's API shows it.
type amAlert struct {
	Labels map[string]string `json:"labels"`
	Status struct {
		State string `json:"state"`
	} `json:"status"`
}

func activeAlerts(ctx context.Context, st *stack.Stack) ([]string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, st.Alertmanager.URL()+"/api/v2/alerts?active=true", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var alerts []amAlert
	if err := json.NewDecoder(resp.Body).Decode(&alerts); err != nil {
		return nil, err
	}
	var out []string
	for _, a := range alerts {
		out = append(out, a.Labels["alertname"]+"/"+a.Labels["severity"])
	}
	// What Prometheus has pending or firing counts too: it reaches
	// Alertmanager at the next evaluation.
	res, err := st.Query(ctx, `ALERTS`)
	if err != nil {
		return nil, err
	}
	for _, s := range res {
		out = append(out, s.Metric["alertname"]+"/"+s.Metric["severity"]+" ("+s.Metric["alertstate"]+" in Prometheus)")
	}
	sort.Strings(out)
	return out, nil
}

// waitQuiet waits until no alert is active in Alertmanager or pending or
// firing in Prometheus.
func waitQuiet(ctx context.Context, st *stack.Stack, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		active, err := activeAlerts(ctx, st)
		if err == nil && len(active) == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("alerts still active after %s: %v (%v)", timeout, active, err)
		}
		time.Sleep(2 * time.Second)
	}
}

// histogram reads a kubelet histogram's count, sum and one bucket.
func histogram(ms map[string]*dto.MetricFamily, name string, le float64) (count, sum, bucket float64) {
	mf, ok := ms[name]
	if !ok || len(mf.GetMetric()) == 0 {
		return 0, 0, 0
	}
	h := mf.GetMetric()[0].GetHistogram()
	for _, b := range h.GetBucket() {
		if b.GetUpperBound() == le {
			bucket = float64(b.GetCumulativeCount())
		}
	}
	return float64(h.GetSampleCount()), h.GetSampleSum(), bucket
}

func sum(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

// firstAlert is the first firing PLEG alert at the webhook after since, and
// the first one that comes from the exporter (not the kubelet's metrics).
func firstAlerts(rec *receiver, since time.Time) (first, exporter event, ok bool) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, e := range rec.events {
		if e.at.Before(since) || e.status != "firing" || !strings.HasPrefix(e.labels["alertname"], "PLEG") {
			continue
		}
		if !ok {
			first, ok = e, true
		}
		if exporter.at.IsZero() && !strings.HasPrefix(e.labels["alertname"], "PLEGKubelet") {
			exporter = e
		}
	}
	return first, exporter, ok
}

func alertName(e event) string { return e.labels["alertname"] + "/" + e.labels["severity"] }
