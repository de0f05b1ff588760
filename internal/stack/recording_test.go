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

package stack

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestStepValues(t *testing.T) {
	start := time.Unix(1000, 0)
	s := Series{
		Metric: map[string]string{"__name__": "kubelet_pleg_last_seen_seconds"},
		// Steps 1 and 2, a gap at 3, step 4; a sample before the start.
		Values: [][2]any{{float64(985), "985"}, {float64(1015), "1014"}, {float64(1030), "1029"}, {float64(1060), "0"}},
	}
	got := strings.Join(stepValues(s, start, 15*time.Second, 6), " ")
	// Rebased on the start, 0 kept, stale in the gap and after the end.
	if want := "_ 14 29 stale 0 stale"; got != want {
		t.Errorf("stepValues = %q, want %q", got, want)
	}
}

func TestLabel(t *testing.T) {
	s := `kubernetes_feature_enabled{instance="a", job="kubelet", name="EventedPLEG", node_name="x", stage="ALPHA"}`
	if got := label(s, "name"); got != "EventedPLEG" {
		t.Errorf("label name = %q", got)
	}
	if got := label(`m{name="first"}`, "name"); got != "first" {
		t.Errorf("label at the start = %q", got)
	}
	if got := label(s, "cluster"); got != "" {
		t.Errorf("a missing label = %q", got)
	}
}

const recordedFile = `# a comment
{
 "tests": [{
  "name": "kubelet v1.36.3 on containerd v1.7.35: at rest at 30s; overflow at 4m15s",
  "input_series": [
   {"series": "kubernetes_build_info{git_version=\"v1.36.3\", job=\"kubelet\"}", "values": "1 1 1"},
   {"series": "kubernetes_feature_enabled{job=\"kubelet\", name=\"EventedPLEG\"}", "values": "1 1 _"},
   {"series": "kubernetes_feature_enabled{job=\"kubelet\", name=\"CRIListStreaming\"}", "values": "0 0 0"},
   {"series": "pleg_runtime_info{job=\"pleg-exporter\", version=\"v1.7.35\"}", "values": "1 1 1"}
  ],
  "promql_expr_test": [
   {"expr": "x", "eval_time": "30s", "exp_samples": []},
   {"expr": "x", "eval_time": "4m15s", "exp_samples": [{"labels": "{alertname=\"PLEGPayloadOverLimit\", severity=\"critical\"}", "value": 1}]}
  ]
 }]
}
`

func TestReadRecording(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.yaml")
	if err := os.WriteFile(path, []byte(recordedFile), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := ReadRecording(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.Cell(), "v1.36.3_containerd-v1.7.35_EventedPLEG"; got != want {
		t.Errorf("cell %q, want %q", got, want)
	}
	if len(r.Checks) != 2 || r.Checks[0].Name != "at rest" || len(r.Checks[0].Alerts) != 0 ||
		r.Checks[1].Name != "overflow" || len(r.Checks[1].Alerts) != 1 {
		t.Errorf("checks %+v", r.Checks)
	}
	if err := SameChecks(r, r); err != nil {
		t.Error(err)
	}
	live := *r
	live.Checks = []RecordedCheck{r.Checks[0], {Name: "overflow"}}
	if err := SameChecks(r, &live); err == nil || !strings.Contains(err.Error(), "check 2") {
		t.Errorf("a check without its alert: %v", err)
	}
	live = *r
	live.Gates = nil
	if err := SameChecks(r, &live); err == nil || !strings.Contains(err.Error(), "_default") {
		t.Errorf("another cell: %v", err)
	}
	// Two runs of one cell on a fresh machine: at NotReady the freeze
	// paged with PLEGRuntimeHung in both; which stall alerts had passed
	// their for: then differed.
	hung, stalled := `{alertname="PLEGRuntimeHung", severity="critical"}`, `{alertname="PLEGRelistStalled", severity="critical"}`
	warn, over := `{alertname="PLEGKubeletStalled", severity="warning"}`, `{alertname="PLEGPayloadOverLimit", severity="critical"}`
	a := &Recorded{Kubelet: "v1.35.4", Runtime: "containerd-v1.7.35", Checks: []RecordedCheck{{Name: "at rest"}, {Name: "freeze", Alerts: []string{warn, over, hung}}}}
	b := &Recorded{Kubelet: "v1.35.4", Runtime: "containerd-v1.7.35", Checks: []RecordedCheck{{Name: "at rest"}, {Name: "freeze", Alerts: []string{stalled, hung}}}}
	if err := SameChecks(a, b); err != nil {
		t.Errorf("paging with the same PLEGRuntimeHung: %v", err)
	}
	if d := Drift(a, b); len(d) != 1 || !strings.Contains(d[0], "PLEGKubeletStalled") || !strings.Contains(d[0], "PLEGRelistStalled") {
		t.Errorf("drift %v", d)
	}
	b.Checks[1].Alerts = []string{stalled, warn}
	if err := SameChecks(a, b); err == nil || !strings.Contains(err.Error(), "none of them") {
		t.Errorf("paging without any of the recorded critical alerts: %v", err)
	}
	b.Checks[0].Alerts = []string{warn}
	if err := SameChecks(a, b); err == nil || !strings.Contains(err.Error(), "check 1") {
		t.Errorf("a quiet check firing: %v", err)
	}
	bad := strings.Replace(recordedFile, `git_version=\"v1.36.3\", `, "", 1)
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRecording(path); err == nil || !strings.Contains(err.Error(), "no kubelet version") {
		t.Errorf("a recording without the kubelet's version: %v", err)
	}
}

// A check whose alerts keep changing past its window is not recorded at
// the next scenario's steady state (the fresh run's freeze checks were
// recorded in the overflow that followed).
func TestSteadyStaysInTheCheck(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	step := 15 * time.Second
	// The alerts change every step for the first 5 minutes, then hold.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts, _ := strconv.ParseFloat(r.URL.Query().Get("time"), 64)
		n := int(time.Unix(int64(ts), 0).Sub(start) / step)
		if n > 20 {
			n = 20
		}
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"alertname":"A%d","severity":"warning"},"value":[%v,"1"]}]}}`, n, ts)
	}))
	defer srv.Close()
	checks := []recordedCheck{{"freeze", start.Add(time.Minute)}, {"overflow", start.Add(10 * time.Minute)}}
	end := start.Add(12 * time.Minute)
	if got := checkUntil(checks, 0, end); !got.Equal(start.Add(time.Minute + checkWindow)) {
		t.Errorf("the freeze's search ends at %v", got.Sub(start))
	}
	if got := checkUntil(checks, 1, end); !got.Equal(start.Add(10*time.Minute + checkWindow)) {
		t.Errorf("the overflow's search ends at %v", got.Sub(start))
	}
	if got := checkUntil(checks[:1], 0, start.Add(80*time.Second)); !got.Equal(start.Add(80 * time.Second)) {
		t.Errorf("a search past the recording's end: %v", got.Sub(start))
	}
	_, _, ok, err := steady(context.Background(), API(srv.URL), start, checks[0], step, checkUntil(checks, 0, end))
	if err != nil || ok {
		t.Errorf("a freeze whose alerts changed at every step of its window was recorded steady (%v)", err)
	}
	at, res, ok, err := steady(context.Background(), API(srv.URL), start, checks[1], step, checkUntil(checks, 1, end))
	if err != nil || !ok || !at.Equal(checks[1].at) || len(res) != 1 || res[0].Metric["alertname"] != "A20" {
		t.Errorf("the overflow's steady step: %v %v %v %v", at.Sub(start), res, ok, err)
	}
}
