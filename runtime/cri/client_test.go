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

func start(t *testing.T, opts fakecri.Options, spec fakecri.Spec) (*fakecri.Server, *cri.Client, []*runtimeapi.PodSandbox, []*runtimeapi.Container) {
	t.Helper()
	srv, err := fakecri.Start(filepath.Join(t.TempDir(), "cri.sock"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	sbs, cts := fakecri.Generate(spec)
	srv.SetPopulation(sbs, cts)
	c, err := cri.New(cri.Config{Endpoint: srv.Endpoint(), MaxRecvBytes: 256 << 20, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return srv, c, sbs, cts
}

func truth(sbs []*runtimeapi.PodSandbox, cts []*runtimeapi.Container) (map[string]int, map[string]int) {
	sb := map[string]int{kubecontainer.SandboxReady: 0, kubecontainer.SandboxNotReady: 0}
	ct := map[string]int{}
	for _, s := range kubecontainer.ContainerStates {
		ct[s] = 0
	}
	for _, s := range sbs {
		sb[kubecontainer.SandboxStateName(s.GetState())]++
	}
	for _, c := range cts {
		ct[kubecontainer.ContainerStateName(c.GetState())]++
	}
	return sb, ct
}

func assertCounts(t *testing.T, snap *kubecontainer.Snapshot, sbs []*runtimeapi.PodSandbox, cts []*runtimeapi.Container) {
	t.Helper()
	wantSB, wantCT := truth(sbs, cts)
	if !snap.Counted {
		t.Fatalf("snapshot not counted: err=%v", snap.Err)
	}
	for k, v := range wantSB {
		if snap.Sandboxes[k] != v {
			t.Errorf("sandboxes[%s] = %d, want %d", k, snap.Sandboxes[k], v)
		}
	}
	for k, v := range wantCT {
		if snap.Containers[k] != v {
			t.Errorf("containers[%s] = %d, want %d", k, snap.Containers[k], v)
		}
	}
}

func TestRelistCountsAndExactPayload(t *testing.T) {
	srv, c, sbs, cts := start(t, fakecri.Options{}, fakecri.Spec{Ready: 7, NotReady: 3, Created: 2, Running: 11, Exited: 40, Unknown: 1})
	snap := c.Relist(context.Background())
	if snap.Err != nil {
		t.Fatal(snap.Err)
	}
	assertCounts(t, snap, sbs, cts)
	if snap.Fallback {
		t.Error("fallback used for a small population")
	}
	wantSB := int64(proto.Size(&runtimeapi.ListPodSandboxResponse{Items: sbs}))
	wantCT := int64(proto.Size(&runtimeapi.ListContainersResponse{Containers: cts}))
	if got := snap.RPCs[kubecontainer.RPCListPodSandbox].PayloadBytes; got != wantSB {
		t.Errorf("ListPodSandbox payload = %d, want %d", got, wantSB)
	}
	if got := snap.RPCs[kubecontainer.RPCListContainers].PayloadBytes; got != wantCT {
		t.Errorf("ListContainers payload = %d, want %d", got, wantCT)
	}
	t.Logf("payload: ListPodSandbox %d bytes, ListContainers %d bytes (server's own proto.Size)", wantSB, wantCT)
	if n := srv.Calls("ListContainers") + srv.Calls("ListPodSandbox"); n != 2 {
		t.Errorf("relist made %d list calls, want exactly 2 (the kubelet's)", n)
	}
}

// 20 MiB of containers: the server refuses to send, as containerd does.
func TestRelistPastLimitFallsBackToStateFilters(t *testing.T) {
	spec := fakecri.Spec{Ready: 50, NotReady: 10, Created: 3000, Running: 60, Exited: 3000, Unknown: 5, PaddingBytes: 3000}
	srv, c, sbs, cts := start(t, fakecri.Options{}, spec)
	full := int64(proto.Size(&runtimeapi.ListContainersResponse{Containers: cts}))
	if full <= fakecri.DefaultMaxSendBytes {
		t.Fatalf("population is only %d bytes", full)
	}
	snap := c.Relist(context.Background())
	if status.Code(snap.Err) != codes.ResourceExhausted && kubecontainer.ErrorCode(snap.Err) != "ResourceExhausted" {
		t.Fatalf("err = %v, want ResourceExhausted", snap.Err)
	}
	assertCounts(t, snap, sbs, cts)
	if !snap.Fallback {
		t.Error("Fallback not set")
	}
	got := snap.RPCs[kubecontainer.RPCListContainers]
	if !got.PayloadKnown || got.PayloadBytes != full {
		t.Errorf("payload from the error = %d (known %v), want %d", got.PayloadBytes, got.PayloadKnown, full)
	}
	// No state alone passes the limit: one call per state, nothing per sandbox.
	if n := srv.Calls("ListContainers"); n != 1+4 {
		t.Errorf("ListContainers calls = %d, want 5 (unfiltered + 4 states)", n)
	}
	t.Logf("payload %d bytes taken from the error, fallback %s", full, snap.FallbackDuration)
}

func TestRelistPastLimitPerSandbox(t *testing.T) {
	// One state alone (exited) is over the limit: split by sandbox.
	spec := fakecri.Spec{Ready: 40, NotReady: 20, Running: 40, Exited: 6000, PaddingBytes: 3000}
	srv, c, sbs, cts := start(t, fakecri.Options{}, spec)
	snap := c.Relist(context.Background())
	if kubecontainer.ErrorCode(snap.Err) != "ResourceExhausted" {
		t.Fatalf("err = %v", snap.Err)
	}
	assertCounts(t, snap, sbs, cts)
	if n := srv.Calls("ListContainers"); n != 1+4+int64(len(sbs)) {
		t.Errorf("ListContainers calls = %d, want %d", n, 1+4+len(sbs))
	}
}

func TestRelistPastLimitStreams(t *testing.T) {
	spec := fakecri.Spec{Ready: 10, Exited: 7000, PaddingBytes: 3000}
	srv, c, sbs, cts := start(t, fakecri.Options{Streaming: true, StreamBatch: 1000}, spec)
	info, err := c.Info(context.Background())
	if err != nil || info.Streaming != "true" {
		t.Fatalf("info = %+v, %v; want streaming true", info, err)
	}
	snap := c.Relist(context.Background())
	assertCounts(t, snap, sbs, cts)
	if srv.Calls("StreamContainers") != 1 || srv.Calls("ListContainers") != 1 {
		t.Errorf("calls: StreamContainers %d, ListContainers %d; want 1 and 1", srv.Calls("StreamContainers"), srv.Calls("ListContainers"))
	}
}

func TestStreamingUnimplementedIsReported(t *testing.T) {
	_, c, _, _ := start(t, fakecri.Options{RuntimeName: "containerd", RuntimeVersion: "1.7.0"}, fakecri.Spec{Ready: 1})
	info, err := c.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Streaming != "false" || info.Runtime != "containerd" || info.Version != "1.7.0" || info.APIVersion != "v1" {
		t.Errorf("info = %+v", info)
	}
}

func TestUnknownFilterRejectedLeavesGap(t *testing.T) {
	spec := fakecri.Spec{Ready: 10, Created: 10, Exited: 7000, Unknown: 3, PaddingBytes: 3000}
	_, c, sbs, cts := start(t, fakecri.Options{RejectUnknownFilter: true}, spec)
	snap := c.Relist(context.Background())
	if !snap.Counted || !snap.ContainersIncomplete {
		t.Fatalf("counted=%v incomplete=%v err=%v", snap.Counted, snap.ContainersIncomplete, snap.Err)
	}
	_, want := truth(sbs, cts)
	for _, s := range []string{kubecontainer.ContainerCreated, kubecontainer.ContainerRunning, kubecontainer.ContainerExited} {
		if snap.Containers[s] != want[s] {
			t.Errorf("containers[%s] = %d, want %d", s, snap.Containers[s], want[s])
		}
	}
}

func TestReadOnlyAllowList(t *testing.T) {
	srv, c, _, cts := start(t, fakecri.Options{}, fakecri.Spec{Ready: 1, Exited: 3})
	rs := runtimeapi.NewRuntimeServiceClient(c.Conn())
	for name, call := range map[string]func() error{
		"RemoveContainer": func() error {
			_, err := rs.RemoveContainer(context.Background(), &runtimeapi.RemoveContainerRequest{ContainerId: cts[0].Id})
			return err
		},
		"StopPodSandbox": func() error {
			_, err := rs.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: "x"})
			return err
		},
		"ExecSync": func() error {
			_, err := rs.ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: cts[0].Id, Cmd: []string{"rm", "-rf", "/"}})
			return err
		},
	} {
		if err := call(); status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s: err = %v, want PermissionDenied", name, err)
		}
		if n := srv.Calls(name); n != 0 {
			t.Errorf("%s reached the server %d times", name, n)
		}
	}
	if snap := c.Relist(context.Background()); snap.Containers[kubecontainer.ContainerExited] != 3 {
		t.Errorf("containers changed: %v", snap.Containers)
	}
	for _, m := range []string{runtimeapi.RuntimeService_ListContainers_FullMethodName, runtimeapi.RuntimeService_Version_FullMethodName} {
		if !cri.Allowed(m) {
			t.Errorf("%s not allowed", m)
		}
	}
}

func TestNoServerThenServerAppears(t *testing.T) {
	path := filepath.Join(t.TempDir(), "late.sock")
	c, err := cri.New(cri.Config{Endpoint: "unix://" + path, MaxRecvBytes: 256 << 20, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	snap := c.Relist(context.Background())
	if snap.Counted || kubecontainer.ErrorCode(snap.Err) != "Unavailable" {
		t.Fatalf("counted=%v code=%s err=%v", snap.Counted, kubecontainer.ErrorCode(snap.Err), snap.Err)
	}
	srv, err := fakecri.Start(path, fakecri.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	sbs, cts := fakecri.Generate(fakecri.Spec{Ready: 2, Running: 2})
	srv.SetPopulation(sbs, cts)
	deadline := time.Now().Add(30 * time.Second)
	for {
		snap = c.Relist(context.Background())
		if snap.Err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if snap.Err != nil {
		t.Fatalf("no recovery: %v", snap.Err)
	}
	assertCounts(t, snap, sbs, cts)
}

func TestHungCallHitsDeadline(t *testing.T) {
	srv, err := fakecri.Start(filepath.Join(t.TempDir(), "cri.sock"), fakecri.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	c, _ := cri.New(cri.Config{Endpoint: srv.Endpoint(), MaxRecvBytes: 256 << 20, Timeout: 300 * time.Millisecond})
	defer c.Close()
	srv.Block()
	snap := c.Relist(context.Background())
	if kubecontainer.ErrorCode(snap.Err) != "DeadlineExceeded" {
		t.Fatalf("code = %s (%v)", kubecontainer.ErrorCode(snap.Err), snap.Err)
	}
	if srv.Calls("ListContainers") != 0 {
		t.Error("ListContainers called after the sandbox list timed out; the kubelet stops there")
	}
}

func TestSocketPath(t *testing.T) {
	for in, want := range map[string]string{
		"unix:///run/containerd/containerd.sock": "/run/containerd/containerd.sock",
		"unix:///var/run/crio/crio.sock":         "/var/run/crio/crio.sock",
	} {
		if got, err := cri.SocketPath(in); err != nil || got != want {
			t.Errorf("SocketPath(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"/run/containerd/containerd.sock", "tcp://127.0.0.1:1", "unix://", "::"} {
		if _, err := cri.SocketPath(bad); err == nil {
			t.Errorf("SocketPath(%q): no error", bad)
		}
	}
}

// A sandbox list too large to send and a container list that fails for
// another reason: the sandboxes are counted through the fallback, but the
// relist is not "counted", and runtime_up must not claim zero containers.
func TestRelistSandboxesTooLargeContainersDown(t *testing.T) {
	spec := fakecri.Spec{Ready: 300, NotReady: 300, Running: 10}
	srv, c, sbs, _ := start(t, fakecri.Options{}, spec)
	size := proto.Size(&runtimeapi.ListPodSandboxResponse{Items: sbs})
	srv.Stop()
	// A send limit between one state's list and the whole one.
	srv, err := fakecri.Start(srv.Path, fakecri.Options{MaxSendBytes: size * 3 / 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	_, cts := fakecri.Generate(spec)
	srv.SetPopulation(sbs, cts)
	srv.Fail("ListContainers", status.Error(codes.Unavailable, "containerd is restarting"))
	// The client may have tried to reconnect while no server listened and be
	// waiting out its backoff: wait until it reaches the new server (Info's
	// calls are Version and a stream probe, neither of them a list).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := c.Info(context.Background()); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the client never reached the restarted server: %v", err)
		}
	}

	snap := c.Relist(context.Background())
	if kubecontainer.ErrorCode(snap.Err) != "ResourceExhausted" {
		t.Fatalf("err = %v, want the sandbox list's ResourceExhausted (the kubelet stops there)", snap.Err)
	}
	if snap.Counted {
		t.Fatalf("counted with the container list down: containers %v", snap.Containers)
	}
	if !snap.Fallback || snap.Sandboxes[kubecontainer.SandboxReady] != 300 || snap.Sandboxes[kubecontainer.SandboxNotReady] != 300 {
		t.Errorf("sandboxes through the fallback: %v (fallback %v)", snap.Sandboxes, snap.Fallback)
	}
	if code := status.Code(snap.RPCs[kubecontainer.RPCListContainers].Err); code != codes.Unavailable {
		t.Errorf("ListContainers error = %v, want Unavailable", snap.RPCs[kubecontainer.RPCListContainers].Err)
	}
	// The report names the call that could not be listed, not the one the
	// fallback listed anyway.
	if _, err := c.Inventory(context.Background()); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "list containers on") {
		t.Errorf("inventory error = %v, want the container list's Unavailable", err)
	}
}

// The inventory reads the node through the same lister as the relist: past
// the limit it streams where the runtime can, every item keeps its identity,
// and the two agree on every count.
func TestInventoryAndRelistShareTheLister(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		spec := fakecri.Spec{Ready: 40, NotReady: 20, Running: 40, Exited: 6000, Unknown: 3, PaddingBytes: 3000, Namespaces: []string{"a", "b"}}
		srv, c, sbs, cts := start(t, fakecri.Options{Streaming: streaming, StreamBatch: 1000}, spec)
		snap := c.Relist(context.Background())
		assertCounts(t, snap, sbs, cts)
		inv, err := c.Inventory(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !inv.Fallback || inv.ListErr == nil || status.Code(inv.ListErr) != codes.ResourceExhausted {
			t.Errorf("streaming %v: fallback %v, list error %v", streaming, inv.Fallback, inv.ListErr)
		}
		if got := srv.Calls("StreamContainers") > 0; got != streaming {
			t.Errorf("streaming %v: StreamContainers called: %v", streaming, got)
		}
		if len(inv.Containers) != len(cts) || len(inv.Sandboxes) != len(sbs) {
			t.Fatalf("streaming %v: inventory has %d containers, %d sandboxes; the runtime %d, %d", streaming, len(inv.Containers), len(inv.Sandboxes), len(cts), len(sbs))
		}
		byID := map[string]*runtimeapi.Container{}
		for _, ct := range cts {
			byID[ct.Id] = ct
		}
		counts := map[string]int{}
		for _, got := range inv.Containers {
			want := byID[got.ID]
			if want == nil || got.Name != want.Metadata.Name || got.Pod != want.Labels["io.kubernetes.pod.name"] ||
				got.Namespace != want.Labels["io.kubernetes.pod.namespace"] || got.CreatedAt.UnixNano() != want.CreatedAt ||
				got.Bytes != kubecontainer.ListItemSize(want) {
				t.Fatalf("streaming %v: inventory item %+v does not match the runtime's %v", streaming, got, want)
			}
			counts[got.State]++
		}
		for st, n := range snap.Containers {
			if counts[st] != n {
				t.Errorf("streaming %v: %s: inventory %d, relist %d", streaming, st, counts[st], n)
			}
		}
		if inv.Payload[kubecontainer.RPCListContainers] != snap.RPCs[kubecontainer.RPCListContainers].PayloadBytes {
			t.Errorf("payload: inventory %d, relist %d", inv.Payload[kubecontainer.RPCListContainers], snap.RPCs[kubecontainer.RPCListContainers].PayloadBytes)
		}
	}
}

// One sandbox whose containers of one state alone pass the runtime's send
// limit cannot be split by any CRI filter: the inventory (gc's) fails
// naming that sandbox and how to remove it, not only the size.
func TestInventoryNamesTheSandboxTooLargeAlone(t *testing.T) {
	spec := fakecri.Spec{Ready: 1, Created: 40, PaddingBytes: 64 << 10}
	_, c, sbs, _ := start(t, fakecri.Options{MaxSendBytes: 1 << 20}, spec)
	_, err := c.Inventory(context.Background())
	id := sbs[0].GetId()
	if err == nil || !strings.Contains(err.Error(), "ResourceExhausted") {
		t.Fatalf("err = %v, want the sandbox's list too large", err)
	}
	if !strings.Contains(err.Error(), "pod sandbox "+id+" alone") || !strings.Contains(err.Error(), "crictl rmp "+id) {
		t.Errorf("err = %q, want it to name sandbox %s and how to remove it", err, id)
	}
}
