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

package testenv

import (
	"context"
	"fmt"
	"regexp"
	"strconv"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// View is the runtime's own answer to the kubelet's two relist calls.
type View struct {
	Containers     map[string]float64 // by kubelet container_state
	Sandboxes      map[string]float64 // ready, notready
	ContainerBytes float64
	SandboxBytes   float64
	Total          int
}

func (v View) String() string {
	return fmt.Sprintf("containers %v (%d, %d bytes), sandboxes %v (%d bytes)", v.Containers, v.Total, int(v.ContainerBytes), v.Sandboxes, int(v.SandboxBytes))
}

func (v View) equal(o View) bool { return v.String() == o.String() }

var stateName = map[runtimeapi.ContainerState]string{
	runtimeapi.ContainerState_CONTAINER_CREATED: "created",
	runtimeapi.ContainerState_CONTAINER_RUNNING: "running",
	runtimeapi.ContainerState_CONTAINER_EXITED:  "exited",
	runtimeapi.ContainerState_CONTAINER_UNKNOWN: "unknown",
}

var sizeRE = regexp.MustCompile(`larger than max \((\d+) vs\. \d+\)`)

// RuntimeView asks the runtime, unfiltered like the kubelet's relist, with a
// receive limit far above 16 MiB. Past containerd's own 16 MiB send limit
// the answer's size is the one containerd's error states, and the
// containers are counted sandbox by sandbox.
func RuntimeView(ctx context.Context, rs runtimeapi.RuntimeServiceClient) (View, error) {
	v := View{Containers: map[string]float64{}, Sandboxes: map[string]float64{}}
	ss, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return v, err
	}
	cs, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	switch {
	case err == nil:
		v.ContainerBytes = float64(proto.Size(cs))
	case status.Code(err) == codes.ResourceExhausted && sizeRE.MatchString(err.Error()):
		n, _ := strconv.Atoi(sizeRE.FindStringSubmatch(err.Error())[1])
		v.ContainerBytes = float64(n)
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
		v.Containers[stateName[c.GetState()]]++
	}
	v.Total = len(cs.GetContainers())
	for _, s := range ss.GetItems() {
		if s.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			v.Sandboxes["ready"]++
		} else {
			v.Sandboxes["notready"]++
		}
	}
	v.SandboxBytes = float64(proto.Size(ss))
	return v, nil
}

// StableView is the runtime's answer when two asks in a row agree, with
// whatever fn scraped in between.
func StableView(ctx context.Context, rs runtimeapi.RuntimeServiceClient, fn func() error) (View, error) {
	a, err := RuntimeView(ctx, rs)
	if err != nil {
		return a, err
	}
	if err := fn(); err != nil {
		return a, err
	}
	b, err := RuntimeView(ctx, rs)
	if err != nil {
		return b, err
	}
	if !a.equal(b) {
		return b, fmt.Errorf("the runtime changed while scraping: %v, then %v", a, b)
	}
	return b, nil
}

// ExporterDiff says how the exporter's view differs from the runtime's.
func ExporterDiff(ms map[string]*dto.MetricFamily, v View) []string {
	var out []string
	got := ByLabel(ms, "pleg_containers", "state")
	for _, s := range []string{"created", "running", "exited", "unknown"} {
		if got[s] != v.Containers[s] {
			out = append(out, fmt.Sprintf("pleg_containers{state=%q} %v, the runtime %v", s, got[s], v.Containers[s]))
		}
	}
	sb := ByLabel(ms, "pleg_sandboxes", "state")
	for _, s := range []string{"ready", "notready"} {
		if sb[s] != v.Sandboxes[s] {
			out = append(out, fmt.Sprintf("pleg_sandboxes{state=%q} %v, the runtime %v", s, sb[s], v.Sandboxes[s]))
		}
	}
	pb := ByLabel(ms, "pleg_relist_payload_bytes", "rpc")
	if pb["ListContainers"] != v.ContainerBytes {
		out = append(out, fmt.Sprintf("pleg_relist_payload_bytes{rpc=\"ListContainers\"} %v, the answer %v bytes", pb["ListContainers"], v.ContainerBytes))
	}
	if pb["ListPodSandbox"] != v.SandboxBytes {
		out = append(out, fmt.Sprintf("pleg_relist_payload_bytes{rpc=\"ListPodSandbox\"} %v, the answer %v bytes", pb["ListPodSandbox"], v.SandboxBytes))
	}
	return out
}

// KubeletDiff says how the kubelet's kubelet_running_containers (every
// state it reports) and kubelet_running_pods differ from the runtime's.
func KubeletDiff(ms map[string]*dto.MetricFamily, v View) []string {
	var out []string
	got := ByLabel(ms, "kubelet_running_containers", "container_state")
	for s, n := range got {
		if n != v.Containers[s] {
			note := ""
			if v.Containers[s] == 0 {
				note = " (the kubelet never resets a state whose count drops to zero)"
			}
			out = append(out, fmt.Sprintf("kubelet_running_containers{container_state=%q} %v, the runtime %v%s", s, n, v.Containers[s], note))
		}
	}
	for s, n := range v.Containers {
		if _, ok := got[s]; !ok && n > 0 {
			out = append(out, fmt.Sprintf("the kubelet reports no %s containers, the runtime %v", s, n))
		}
	}
	if pods, _ := Gauge(ms, "kubelet_running_pods", nil); pods != v.Sandboxes["ready"] {
		out = append(out, fmt.Sprintf("kubelet_running_pods %v, ready sandboxes %v", pods, v.Sandboxes["ready"]))
	}
	return out
}

// Histogram reads a kubelet histogram's count, sum and one bucket.
func Histogram(ms map[string]*dto.MetricFamily, name string, le float64) (count, sum, bucket float64) {
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

// Sum adds a series' values up (ByLabel's).
func Sum(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}
