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

package cri_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/internal/fakecri"
	"github.com/pleg-exporter/pleg_exporter/runtime/cri"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

func startInspecting(t *testing.T, timeout time.Duration) (*fakecri.Server, *cri.Client, []*runtimeapi.PodSandbox, []*runtimeapi.Container) {
	t.Helper()
	srv, err := fakecri.Start(filepath.Join(t.TempDir(), "cri.sock"), fakecri.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	sbs, cts := fakecri.Generate(fakecri.Spec{Ready: 3, Running: 3, Exited: 6})
	// A second, older sandbox of pod 0: the kubelet inspects the newest
	// first.
	old := proto.Clone(sbs[0]).(*runtimeapi.PodSandbox)
	old.Id, old.CreatedAt, old.State = strings.Repeat("0", 64), sbs[0].CreatedAt-1e9, runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	sbs = append(sbs, old)
	srv.SetPopulation(sbs, cts)
	c, err := cri.New(cri.Config{Endpoint: srv.Endpoint(), MaxRecvBytes: 256 << 20, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return srv, c, sbs, cts
}

func podContainers(cts []*runtimeapi.Container, sandboxes ...string) []string {
	var ids []string
	for _, c := range cts {
		if slices.Contains(sandboxes, c.PodSandboxId) {
			ids = append(ids, c.Id)
		}
	}
	return ids
}

func rpcs(in kubecontainer.PodInspection) []string {
	var out []string
	for _, c := range in.Calls {
		out = append(out, c.RPC+" "+c.ID)
	}
	return out
}

// The kubelet's GetPodStatus sequence: the pod's sandboxes newest first,
// each one's status, its containers, each one's status; and each call told
// to the tracker as it starts and ends.
func TestInspectPodSequence(t *testing.T) {
	srv, c, sbs, cts := startInspecting(t, 10*time.Second)
	pod := sbs[0].Metadata
	var begun, ended []string
	in := c.InspectPod(context.Background(), pod.Uid, kubecontainer.CallTracker{
		Begin: func(rpc, id string) { begun = append(begun, rpc+" "+id) },
		End:   func(sc kubecontainer.StatusCall) { ended = append(ended, sc.RPC+" "+sc.ID) },
	})
	if in.Err != nil {
		t.Fatal(in.Err)
	}
	want := []string{"ListPodSandbox ", "PodSandboxStatus " + sbs[0].Id, "PodSandboxStatus " + sbs[3].Id, "ListContainers "}
	for _, id := range podContainers(cts, sbs[0].Id, sbs[3].Id) {
		want = append(want, "ContainerStatus "+id)
	}
	if got := rpcs(in); !slices.Equal(got, want) {
		t.Errorf("calls:\n got %q\nwant %q", got, want)
	}
	if !slices.Equal(begun, want) || !slices.Equal(ended, want) {
		t.Errorf("tracker: begun %q ended %q", begun, ended)
	}
	if in.Name != pod.Name || in.Namespace != pod.Namespace || in.UID != pod.Uid {
		t.Errorf("pod %s/%s %s, want %s/%s %s", in.Namespace, in.Name, in.UID, pod.Namespace, pod.Name, pod.Uid)
	}
	if !slices.Equal(in.Sandboxes, []string{sbs[0].Id, sbs[3].Id}) {
		t.Errorf("sandboxes %v, want newest first", in.Sandboxes)
	}
	if n := srv.Calls("PodSandboxStatus") + srv.Calls("ContainerStatus"); n != int64(len(want)-2) {
		t.Errorf("the runtime got %d status calls, want %d", n, len(want)-2)
	}
	if in.Duration <= 0 || in.Start.IsZero() {
		t.Errorf("duration %v start %v", in.Duration, in.Start)
	}
}

// A status call that hangs waits for its own deadline, as the kubelet's
// does; the inspection ends there with DeadlineExceeded and makes no
// further call.
func TestInspectPodHangs(t *testing.T) {
	srv, c, sbs, cts := startInspecting(t, 300*time.Millisecond)
	srv.HangStatus(sbs[1].Id)
	in := c.InspectPod(context.Background(), sbs[1].Metadata.Uid, kubecontainer.CallTracker{})
	if code := kubecontainer.ErrorCode(in.Err); code != "DeadlineExceeded" {
		t.Fatalf("error %v (code %s), want DeadlineExceeded", in.Err, code)
	}
	if in.Failed.RPC != kubecontainer.RPCPodSandboxStatus || in.Failed.ID != sbs[1].Id || in.Failed.Duration < 300*time.Millisecond {
		t.Errorf("failed call %+v", in.Failed)
	}
	if !strings.Contains(in.Err.Error(), sbs[1].Id) {
		t.Errorf("error does not name the sandbox: %v", in.Err)
	}
	if got := rpcs(in); len(got) != 2 {
		t.Errorf("calls after the hang: %q", got)
	}
	// A hung container: the sandbox answered, the container's call hangs.
	ids := podContainers(cts, sbs[2].Id)
	srv.HangStatus(ids[0])
	in = c.InspectPod(context.Background(), sbs[2].Metadata.Uid, kubecontainer.CallTracker{})
	if in.Failed.RPC != kubecontainer.RPCContainerStatus || in.Failed.ID != ids[0] || kubecontainer.ErrorCode(in.Err) != "DeadlineExceeded" {
		t.Errorf("failed %+v err %v", in.Failed, in.Err)
	}
	// The caller's context ends a hang at once.
	c2, err := cri.New(cri.Config{Endpoint: srv.Endpoint(), MaxRecvBytes: 256 << 20, Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	if in := c2.InspectPod(ctx, sbs[1].Metadata.Uid, kubecontainer.CallTracker{}); in.Err == nil || time.Since(t0) > time.Minute {
		t.Errorf("cancelled inspection: err %v after %s", in.Err, time.Since(t0))
	}
}

// NotFound is skipped as the kubelet skips it (the item went between the
// list and the call); any other error ends the inspection; a pod that is
// gone has nothing to inspect and is no failure.
func TestInspectPodErrors(t *testing.T) {
	srv, c, sbs, cts := startInspecting(t, 10*time.Second)
	// The second sandbox of pod 0 goes between the list and its status.
	ids := podContainers(cts, sbs[0].Id, sbs[3].Id)
	srv.FailStatus(sbs[3].Id, status.Error(codes.NotFound, "sandbox not found"))
	in := c.InspectPod(context.Background(), sbs[0].Metadata.Uid, kubecontainer.CallTracker{})
	if in.Err != nil {
		t.Fatalf("NotFound ended the inspection: %v", in.Err)
	}
	if len(in.Calls) != 4+len(ids) {
		t.Errorf("%d calls, want every one: %q", len(in.Calls), rpcs(in))
	}
	// Unavailable ends it.
	srv.FailStatus(ids[0], status.Error(codes.Unavailable, "shim gone"))
	in = c.InspectPod(context.Background(), sbs[0].Metadata.Uid, kubecontainer.CallTracker{})
	if kubecontainer.ErrorCode(in.Err) != "Unavailable" || in.Failed.ID != ids[0] {
		t.Errorf("err %v failed %+v", in.Err, in.Failed)
	}
	// A pod with nothing left: one empty list each, no failure.
	in = c.InspectPod(context.Background(), "no-such-pod", kubecontainer.CallTracker{})
	if in.Err != nil || !slices.Equal(rpcs(in), []string{"ListPodSandbox ", "ListContainers "}) {
		t.Errorf("gone pod: err %v calls %q", in.Err, rpcs(in))
	}
	// A runtime that does not implement the status call fails the pod
	// with Unimplemented, as the kubelet's would.
	srv.Fail("PodSandboxStatus", status.Error(codes.Unimplemented, "unknown method PodSandboxStatus"))
	in = c.InspectPod(context.Background(), sbs[1].Metadata.Uid, kubecontainer.CallTracker{})
	if kubecontainer.ErrorCode(in.Err) != "Unimplemented" {
		t.Errorf("unimplemented: %v", in.Err)
	}
}
