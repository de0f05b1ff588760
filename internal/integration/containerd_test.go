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

package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// truth is what the harness's own unrestricted CRI client sees.
type truth struct {
	containers map[string]int
	sandboxes  map[string]int
	ctBytes    int64 // Σ element sizes = size of one unfiltered ListContainers answer
	sbBytes    int64
}

func elem(m proto.Message) int64 {
	return int64(protowire.SizeTag(1) + protowire.SizeBytes(proto.Size(m)))
}

// readTruth lists per sandbox and state, so it works past the 16 MiB limit
// as long as no single pod holds 16 MiB of one state.
func readTruth(t *testing.T, c context.Context, rt *containerdRuntime) truth {
	t.Helper()
	tr := truth{containers: map[string]int{}, sandboxes: map[string]int{}}
	resp, err := rt.pods.RS.ListPodSandbox(c, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatalf("truth: list sandboxes: %v", err)
	}
	for _, s := range resp.Items {
		tr.sandboxes[kubecontainer.SandboxStateName(s.State)]++
		tr.sbBytes += elem(s)
		for _, st := range []runtimeapi.ContainerState{0, 1, 2, 3} {
			cs, err := rt.pods.RS.ListContainers(c, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
				PodSandboxId: s.Id, State: &runtimeapi.ContainerStateValue{State: st}}})
			if err != nil {
				t.Fatalf("truth: list %v in %s: %v", st, s.Id, err)
			}
			tr.containers[kubecontainer.ContainerStateName(st)] += len(cs.Containers)
			for _, ct := range cs.Containers {
				tr.ctBytes += elem(ct)
			}
		}
	}
	return tr
}

func checkCounts(t *testing.T, got map[string]float64, tr truth) {
	t.Helper()
	for _, s := range kubecontainer.ContainerStates {
		if v := got["pleg_containers{state="+s+"}"]; v != float64(tr.containers[s]) {
			t.Errorf("pleg_containers{state=%q} = %v, runtime says %d", s, v, tr.containers[s])
		}
	}
	for _, s := range kubecontainer.SandboxStates {
		if v := got["pleg_sandboxes{state="+s+"}"]; v != float64(tr.sandboxes[s]) {
			t.Errorf("pleg_sandboxes{state=%q} = %v, runtime says %d", s, v, tr.sandboxes[s])
		}
	}
}

// populate creates, once per runtime, a small kubelet-like population over
// three namespaces: running, exited and created-never-started containers,
// ready and notready sandboxes.
func populate(t *testing.T, rt *containerdRuntime) {
	t.Helper()
	if rt.populated {
		return
	}
	kubelet := rt.pods
	c := ctx(t, 3*time.Minute)
	for i, ns := range []string{"default", "batch-jobs", "monitoring"} {
		for p := 0; p <= i; p++ {
			pod, err := kubelet.RunPod(c, ns, fmt.Sprintf("app%d-%d", i, p))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := kubelet.CreateContainer(c, pod, testenv.ContainerSpec{Name: "main", Start: true}); err != nil {
				t.Fatal(err)
			}
			for a := 0; a < i+1; a++ {
				id, err := kubelet.CreateContainer(c, pod, testenv.ContainerSpec{Name: "job", Attempt: uint32(a), Command: []string{"/bin/true"}, Start: true})
				if err != nil {
					t.Fatal(err)
				}
				if err := kubelet.WaitState(c, id, runtimeapi.ContainerState_CONTAINER_EXITED); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := kubelet.CreateContainer(c, pod, testenv.ContainerSpec{Name: "never-started"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A finished pod: its sandbox is notready and its containers exited.
	done, err := kubelet.RunPod(c, "batch-jobs", "cron-29218680-tzdzg")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kubelet.CreateContainer(c, done, testenv.ContainerSpec{Name: "worker", Start: true}); err != nil {
		t.Fatal(err)
	}
	if err := kubelet.StopPod(c, done); err != nil {
		t.Fatal(err)
	}
	rt.populated = true
}

func TestContainerdCountsAndPayload(t *testing.T) {
	onEachContainerd(t, func(t *testing.T, rt *containerdRuntime) {
		populate(t, rt)
		r, reg, _ := exporterFor(t, rt.ctd.Endpoint(), time.Hour)
		c := ctx(t, time.Minute)
		// The exact answer sizes, from the harness's own unfiltered lists,
		// the same before and after the relist: on a loaded machine a
		// sandbox just stopped can still change its answer for a moment.
		answers := func() (*runtimeapi.ListContainersResponse, *runtimeapi.ListPodSandboxResponse) {
			ct, err := rt.pods.RS.ListContainers(c, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{}})
			if err != nil {
				t.Fatal(err)
			}
			sb, err := rt.pods.RS.ListPodSandbox(c, &runtimeapi.ListPodSandboxRequest{})
			if err != nil {
				t.Fatal(err)
			}
			return ct, sb
		}
		var got map[string]float64
		var tr truth
		var ct *runtimeapi.ListContainersResponse
		var sb *runtimeapi.ListPodSandboxResponse
		for attempt := 1; ; attempt++ {
			ct0, sb0 := answers()
			r.RelistOnce(c)
			got = series(t, reg)
			tr = readTruth(t, c, rt)
			ct, sb = answers()
			if sameItems(ct0.GetContainers(), ct.GetContainers()) && sameItems(sb0.GetItems(), sb.GetItems()) {
				break
			}
			t.Logf("attempt %d: the runtime's answer changed during the relist (containers %d → %d B, sandboxes %d → %d B)",
				attempt, proto.Size(ct0), proto.Size(ct), proto.Size(sb0), proto.Size(sb))
			if attempt == 10 {
				t.Fatal("the runtime's answer did not settle")
			}
			time.Sleep(time.Second)
		}
		checkCounts(t, got, tr)
		if got["pleg_runtime_up"] != 1 || got["pleg_relist_fallback"] != 0 {
			t.Errorf("up=%v fallback=%v", got["pleg_runtime_up"], got["pleg_relist_fallback"])
		}
		wantCT, wantSB := proto.Size(ct), proto.Size(sb)
		if v := got["pleg_relist_payload_bytes{rpc=ListContainers}"]; v != float64(wantCT) {
			t.Errorf("ListContainers payload = %v, runtime's answer is %d bytes", v, wantCT)
		}
		if v := got["pleg_relist_payload_bytes{rpc=ListPodSandbox}"]; v != float64(wantSB) {
			t.Errorf("ListPodSandbox payload = %v, runtime's answer is %d bytes", v, wantSB)
		}
		t.Logf("containerd truth: containers %v, sandboxes %v; payload ListContainers %d B, ListPodSandbox %d B; relist %.1f ms",
			tr.containers, tr.sandboxes, wantCT, wantSB, got["pleg_relist_last_duration_seconds"]*1000)
	})
}

// sameItems reports whether two lists hold the same items, in any order
// (containerd lists in no fixed order).
func sameItems[M proto.Message](a, b []M) bool {
	if len(a) != len(b) {
		return false
	}
	enc := func(l []M) []string {
		out := make([]string, len(l))
		for i, m := range l {
			b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(m)
			out[i] = string(b)
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(enc(a), enc(b))
}

// streamingLabel is the streaming label of pleg_runtime_info.
func streamingLabel(got map[string]float64) string {
	for k := range got {
		if strings.HasPrefix(k, "pleg_runtime_info{") {
			if _, rest, ok := strings.Cut(k, "{streaming="); ok {
				v, _, _ := strings.Cut(rest, "}")
				return v
			}
		}
	}
	return ""
}

// kubeletClient lists with the kubelet's settings: 16 MiB receive limit.
func kubeletClient(t *testing.T, rt *containerdRuntime) runtimeapi.RuntimeServiceClient {
	t.Helper()
	cc, err := grpc.NewClient(rt.ctd.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return runtimeapi.NewRuntimeServiceClient(cc)
}

func TestContainerdOverflow(t *testing.T) {
	onEachContainerd(t, func(t *testing.T, rt *containerdRuntime) {
		populate(t, rt)
		c := ctx(t, 8*time.Minute)
		var pods []*testenv.Pod
		for i := 0; i < 2; i++ {
			pod, err := rt.pods.RunPod(c, "leaky-ns", fmt.Sprintf("leaky-cron-%d", i))
			if err != nil {
				t.Fatal(err)
			}
			pods = append(pods, pod)
		}
		pad := strings.Repeat("p", 64<<10)
		var ids []string
		defer func() {
			for _, id := range ids {
				rt.pods.RemoveContainer(context.Background(), id)
			}
		}()
		t0 := time.Now()
		for readTruth(t, c, rt).ctBytes <= 16<<20 {
			for i := 0; i < 32; i++ {
				id, err := rt.pods.CreateContainer(c, pods[len(ids)%2], testenv.ContainerSpec{
					Name: "leak", Attempt: uint32(len(ids)),
					ExtraAnnotations: map[string]string{"example.com/payload": pad},
				})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
			}
		}
		tr := readTruth(t, c, rt)
		t.Logf("created %d padded containers in %s; ListContainers answer is now %d bytes", len(ids), time.Since(t0).Round(time.Millisecond), tr.ctBytes)

		// The kubelet's relist now fails, exactly as in the field.
		_, kerr := kubeletClient(t, rt).ListContainers(c, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{}})
		if status.Code(kerr) != codes.ResourceExhausted {
			t.Fatalf("kubelet-like ListContainers: %v, want ResourceExhausted", kerr)
		}
		t.Logf("kubelet-like client: %v", kerr)

		r, reg, _ := exporterFor(t, rt.ctd.Endpoint(), 500*time.Millisecond)
		rctx, stop := context.WithCancel(c)
		defer stop()
		go r.Run(rctx)
		<-r.FirstRelistDone()
		got := series(t, reg)
		checkCounts(t, got, tr)
		if v := got["pleg_relist_payload_bytes{rpc=ListContainers}"]; v != float64(tr.ctBytes) {
			t.Errorf("payload from the error = %v, the runtime's answer is %d bytes", v, tr.ctBytes)
		}
		if got["pleg_runtime_up"] != 1 || got["pleg_relist_fallback"] != 1 || got["pleg_relist_errors_total{code=ResourceExhausted}"] < 1 {
			t.Errorf("up=%v fallback=%v errors=%v", got["pleg_runtime_up"], got["pleg_relist_fallback"], got["pleg_relist_errors_total{code=ResourceExhausted}"])
		}
		// containerd 2.4 streams (1.6 and 1.7 do not), in messages of up to 5000 containers: these
		// few hundred padded ones are one message past the limit, which it
		// refuses to send as it refuses the whole answer. A kubelet with the
		// CRIListStreaming gate fails the same way, and the exporter says so.
		streams := streamingLabel(got)
		msg, measured := got["pleg_relist_stream_message_max_bytes{rpc=ListContainers}"]
		switch {
		case !rt.streams && (streams != "false" || measured):
			t.Errorf("containerd %s: streaming=%q, stream message %v (exported %v); it has no list streaming", rt.name, streams, msg, measured)
		case rt.streams && (streams != "true" || msg != float64(tr.ctBytes)):
			t.Errorf("containerd %s: streaming=%q, largest stream message %v, want the one refused message of %d bytes", rt.name, streams, msg, tr.ctBytes)
		}
		if rt.streams {
			st, err := rt.pods.RS.StreamContainers(c, &runtimeapi.StreamContainersRequest{Filter: &runtimeapi.ContainerFilter{}})
			if err == nil {
				_, err = st.Recv()
			}
			if status.Code(err) != codes.ResourceExhausted {
				t.Errorf("StreamContainers of one message past the limit: %v, want ResourceExhausted", err)
			}
			t.Logf("containerd %s streams (runtime_info streaming=%q); its one message: %v", rt.name, streams, err)
		}
		first := got["pleg_last_seen_seconds"]
		time.Sleep(3 * time.Second)
		got = series(t, reg)
		if grew := got["pleg_last_seen_seconds"] - first; grew < 2.5 {
			t.Errorf("last seen grew only %.2fs in 3s of overflow", grew)
		}
		t.Logf("overflow: payload %.0f B, fallback %.0f ms, last seen %.1fs → %.1fs", got["pleg_relist_payload_bytes{rpc=ListContainers}"],
			got["pleg_relist_fallback_last_duration_seconds"]*1000, first, got["pleg_last_seen_seconds"])

		// Clean up the leak: recovery within one interval.
		for _, id := range ids {
			if err := rt.pods.RemoveContainer(c, id); err != nil {
				t.Fatal(err)
			}
		}
		ids = nil
		removed := time.Now()
		after := readTruth(t, c, rt)
		want := fmt.Sprint(after.containers["created"])
		for {
			got = series(t, reg)
			if got["pleg_last_seen_seconds"] < 1 && got["pleg_relist_fallback"] == 0 && fmt.Sprint(got["pleg_containers{state=created}"]) == want {
				break
			}
			if time.Since(removed) > 10*time.Second {
				t.Fatalf("no recovery 10s after cleanup: last seen %.1fs", got["pleg_last_seen_seconds"])
			}
			time.Sleep(20 * time.Millisecond)
		}
		took := time.Since(removed)
		if took > 2*time.Second {
			t.Errorf("recovery took %s, more than one 500ms interval plus a relist", took)
		}
		t.Logf("recovered %s after the cleanup (interval 500ms)", took.Round(time.Millisecond))
		checkCounts(t, got, after)
	})
}

func TestContainerdFreezeAndRestart(t *testing.T) {
	onEachContainerd(t, func(t *testing.T, rt *containerdRuntime) {
		populate(t, rt)
		r, reg, _ := exporterFor(t, rt.ctd.Endpoint(), time.Second)
		rctx, stop := context.WithCancel(context.Background())
		defer stop()
		go r.Run(rctx)
		<-r.FirstRelistDone()
		srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		defer srv.Close()

		scrape := func() (time.Duration, map[string]float64) {
			t0 := time.Now()
			resp, err := http.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return time.Since(t0), series(t, reg)
		}
		if err := rt.ctd.Freeze(); err != nil {
			t.Fatal(err)
		}
		frozen := time.Now()
		defer rt.ctd.Thaw()
		_, got := scrape()
		start := got["pleg_last_seen_seconds"]
		var worst time.Duration
		n := 0
		for time.Since(frozen) < 30*time.Second {
			d, g := scrape()
			worst = max(worst, d)
			got = g
			n++
			time.Sleep(100 * time.Millisecond)
		}
		if worst > 200*time.Millisecond {
			t.Errorf("slowest of %d scrapes during the freeze: %s", n, worst)
		}
		grew := got["pleg_last_seen_seconds"] - start
		if grew < 25 {
			t.Errorf("last seen grew %.1fs during a 30s freeze", grew)
		}
		t.Logf("freeze: %d scrapes, slowest %s; last seen %.1fs → %.1fs", n, worst, start, got["pleg_last_seen_seconds"])

		if err := rt.ctd.Thaw(); err != nil {
			t.Fatal(err)
		}
		thawed := time.Now()
		for got["pleg_last_seen_seconds"] > 2 {
			if time.Since(thawed) > 10*time.Second {
				t.Fatalf("no recovery 10s after SIGCONT: last seen %.1fs", got["pleg_last_seen_seconds"])
			}
			time.Sleep(50 * time.Millisecond)
			_, got = scrape()
		}
		t.Logf("thaw: back to normal %s after SIGCONT", time.Since(thawed).Round(time.Millisecond))

		rt.ctd.Crash()
		crashed := time.Now()
		for got["pleg_runtime_up"] != 0 {
			if time.Since(crashed) > 20*time.Second {
				t.Fatal("runtime_up still 1 after the runtime was killed")
			}
			time.Sleep(100 * time.Millisecond)
			_, got = scrape()
		}
		if err := rt.ctd.Restart(); err != nil {
			t.Fatal(err)
		}
		restarted := time.Now()
		for got["pleg_runtime_up"] != 1 || got["pleg_last_seen_seconds"] > 2 {
			if time.Since(restarted) > 30*time.Second {
				t.Fatalf("no reconnection 30s after restart: up=%v", got["pleg_runtime_up"])
			}
			time.Sleep(100 * time.Millisecond)
			_, got = scrape()
		}
		t.Logf("restart: reconnected by itself %s after containerd came back", time.Since(restarted).Round(time.Millisecond))
		checkCounts(t, got, readTruth(t, ctx(t, time.Minute), rt))
	})
}

func TestContainerdReadOnly(t *testing.T) {
	onEachContainerd(t, func(t *testing.T, rt *containerdRuntime) {
		populate(t, rt)
		c := ctx(t, time.Minute)
		before := readTruth(t, c, rt)
		_, _, client := exporterFor(t, rt.ctd.Endpoint(), time.Hour)
		rs := runtimeapi.NewRuntimeServiceClient(client.Conn())
		list, err := rt.pods.RS.ListContainers(c, &runtimeapi.ListContainersRequest{})
		if err != nil || len(list.Containers) == 0 {
			t.Fatalf("no containers: %v", err)
		}
		id := list.Containers[0].Id
		if _, err := rs.RemoveContainer(c, &runtimeapi.RemoveContainerRequest{ContainerId: id}); status.Code(err) != codes.PermissionDenied {
			t.Errorf("RemoveContainer through the exporter's client: %v", err)
		}
		if _, err := rs.StopContainer(c, &runtimeapi.StopContainerRequest{ContainerId: id}); status.Code(err) != codes.PermissionDenied {
			t.Errorf("StopContainer through the exporter's client: %v", err)
		}
		if _, err := rs.RemovePodSandbox(c, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: list.Containers[0].PodSandboxId}); status.Code(err) != codes.PermissionDenied {
			t.Errorf("RemovePodSandbox through the exporter's client: %v", err)
		}
		after := readTruth(t, c, rt)
		if fmt.Sprint(before) != fmt.Sprint(after) {
			t.Errorf("runtime changed: before %v, after %v", before, after)
		}
	})
}
