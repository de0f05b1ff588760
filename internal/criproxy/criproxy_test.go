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

package criproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/internal/fakecri"
)

// env is a fake runtime, the proxy in front of it, and a client of each.
type env struct {
	fake   *fakecri.Server
	proxy  *Proxy
	direct runtimeapi.RuntimeServiceClient
	via    runtimeapi.RuntimeServiceClient
	viaImg runtimeapi.ImageServiceClient
}

func dial(t *testing.T, endpoint string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func newEnv(t *testing.T, opts fakecri.Options) *env {
	t.Helper()
	dir := t.TempDir()
	fake, err := fakecri.Start(filepath.Join(dir, "cri.sock"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Stop)
	p, err := Start(filepath.Join(dir, "proxy.sock"), fake.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	via := dial(t, p.Endpoint())
	return &env{fake: fake, proxy: p, direct: runtimeapi.NewRuntimeServiceClient(dial(t, fake.Endpoint())),
		via: runtimeapi.NewRuntimeServiceClient(via), viaImg: runtimeapi.NewImageServiceClient(via)}
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Unary calls of both services and the streaming lists come back as the
// runtime sent them: the same messages, byte for byte.
func TestForwardsByteForByte(t *testing.T) {
	e := newEnv(t, fakecri.Options{Streaming: true, StreamBatch: 700})
	sb, cs := fakecri.Generate(fakecri.BenchSpec(3000, 400))
	e.fake.SetPopulation(sb, cs)
	ctx := ctxTimeout(t, time.Minute)

	same := func(what string, direct, via proto.Message, derr, verr error) {
		t.Helper()
		if derr != nil || verr != nil {
			t.Fatalf("%s: direct %v, through the proxy %v", what, derr, verr)
		}
		if !proto.Equal(direct, via) {
			t.Errorf("%s: the proxy's answer differs from the runtime's", what)
		}
		if a, b := proto.Size(direct), proto.Size(via); a != b {
			t.Errorf("%s: %d bytes through the proxy, %d from the runtime", what, b, a)
		}
	}
	dv, derr := e.direct.Version(ctx, &runtimeapi.VersionRequest{})
	vv, verr := e.via.Version(ctx, &runtimeapi.VersionRequest{})
	same("Version", dv, vv, derr, verr)
	dl, derr := e.direct.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{}})
	vl, verr := e.via.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{}})
	same("ListContainers", dl, vl, derr, verr)
	if len(vl.GetContainers()) != len(cs) {
		t.Errorf("ListContainers: %d containers, want %d", len(vl.GetContainers()), len(cs))
	}
	t.Logf("ListContainers: %d containers, %d bytes through the proxy", len(cs), proto.Size(vl))
	ds, derr := e.direct.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	vs, verr := e.via.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	same("ListPodSandbox", ds, vs, derr, verr)
	filter := &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": sb[3].GetMetadata().GetUid()}}
	df, derr := e.direct.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: filter})
	vf, verr := e.via.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: filter})
	same("ListContainers filtered by pod uid", df, vf, derr, verr)
	if len(vf.GetContainers()) == 0 || len(vf.GetContainers()) == len(cs) {
		t.Errorf("the filter went astray: %d containers", len(vf.GetContainers()))
	}
	di, derr := runtimeapi.NewImageServiceClient(dial(t, e.fake.Endpoint())).ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	vi, verr := e.viaImg.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	same("ImageService/ImageFsInfo", di, vi, derr, verr)

	// A server stream: the same number of messages of the same sizes.
	read := func(c runtimeapi.RuntimeServiceClient) (sizes []int, all []*runtimeapi.Container) {
		st, err := c.StreamContainers(ctx, &runtimeapi.StreamContainersRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for {
			m, err := st.Recv()
			if errors.Is(err, io.EOF) {
				return sizes, all
			}
			if err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, proto.Size(m))
			all = append(all, m.GetContainers()...)
		}
	}
	dsz, dall := read(e.direct)
	vsz, vall := read(e.via)
	if fmt.Sprint(dsz) != fmt.Sprint(vsz) {
		t.Errorf("StreamContainers: message sizes %v through the proxy, %v from the runtime", vsz, dsz)
	}
	if len(vall) != len(dall) || len(vsz) < 2 {
		t.Errorf("StreamContainers: %d containers in %d messages through the proxy, %d from the runtime", len(vall), len(vsz), len(dall))
	}
	t.Logf("StreamContainers: %d messages of %v bytes through the proxy", len(vsz), vsz)
	if n := e.proxy.Calls("ListContainers"); n != 2 {
		t.Errorf("Calls(ListContainers) = %d, want 2", n)
	}
	if n := e.proxy.Calls("/runtime.v1.RuntimeService/StreamContainers"); n != 1 {
		t.Errorf("Calls(StreamContainers) = %d, want 1", n)
	}
	if n := e.proxy.Calls("ImageFsInfo"); n != 1 {
		t.Errorf("Calls(ImageFsInfo) = %d, want 1", n)
	}
}

// Answers past 16 MiB pass (the proxy's own limits are far above), and
// the runtime's refusal to send one comes back with its code and text.
func TestLargeAnswersAndErrorsPassThrough(t *testing.T) {
	e := newEnv(t, fakecri.Options{MaxSendBytes: 64 << 20})
	sb, cs := fakecri.Generate(fakecri.Spec{Ready: 10, Exited: 1200, PaddingBytes: 16 << 10})
	e.fake.SetPopulation(sb, cs)
	ctx := ctxTimeout(t, time.Minute)
	r, err := e.via.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if n := proto.Size(r); n <= 16<<20 {
		t.Fatalf("the answer is only %d bytes", n)
	} else {
		t.Logf("a %d-byte answer passed", n)
	}

	small := newEnv(t, fakecri.Options{}) // containerd's 16 MiB send limit
	small.fake.SetPopulation(sb, cs)
	_, derr := small.direct.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	_, verr := small.via.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if status.Code(derr) != codes.ResourceExhausted || !strings.Contains(derr.Error(), "vs. 16777216") {
		t.Fatalf("the runtime answered %v", derr)
	}
	if status.Code(verr) != status.Code(derr) || status.Convert(verr).Message() != status.Convert(derr).Message() {
		t.Errorf("through the proxy: %v\nfrom the runtime:  %v", verr, derr)
	}
	t.Logf("passed through: %v", verr)

	small.fake.Fail("ListPodSandbox", status.Error(codes.Unavailable, "runtime is shutting down"))
	_, verr = small.via.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if status.Code(verr) != codes.Unavailable || status.Convert(verr).Message() != "runtime is shutting down" {
		t.Errorf("ListPodSandbox through the proxy: %v", verr)
	}
	// A method the runtime does not serve (the event stream).
	st, err := small.via.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err == nil {
		_, err = st.Recv()
	}
	dst, derr := small.direct.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if derr == nil {
		_, derr = dst.Recv()
	}
	if status.Code(err) != codes.Unimplemented || status.Convert(err).Message() != status.Convert(derr).Message() {
		t.Errorf("GetContainerEvents through the proxy: %v, from the runtime: %v", err, derr)
	}
}

// seeing is an upstream that answers Version with the deadline and the
// metadata its call arrived with.
type seeing struct {
	runtimeapi.UnimplementedRuntimeServiceServer
}

func (seeing) Version(ctx context.Context, _ *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	dl, ok := ctx.Deadline()
	md, _ := metadata.FromIncomingContext(ctx)
	left := ""
	if ok {
		left = time.Until(dl).String()
	}
	return &runtimeapi.VersionResponse{RuntimeName: left, RuntimeVersion: strings.Join(md.Get("x-test"), ",")}, nil
}

// The caller's deadline becomes the upstream call's; its metadata goes
// along.
func TestDeadlinePassesThrough(t *testing.T) {
	dir := t.TempDir()
	lis, err := net.Listen("unix", filepath.Join(dir, "up.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, seeing{})
	go srv.Serve(lis)
	defer srv.Stop()
	p, err := Start(filepath.Join(dir, "proxy.sock"), filepath.Join(dir, "up.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := runtimeapi.NewRuntimeServiceClient(dial(t, p.Endpoint()))
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "x-test", "kept"), 2*time.Minute)
	defer cancel()
	r, err := c.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	left, err := time.ParseDuration(r.GetRuntimeName())
	if err != nil {
		t.Fatalf("the upstream call had no deadline (%q)", r.GetRuntimeName())
	}
	if left > 2*time.Minute || left < 90*time.Second {
		t.Errorf("the upstream call had %s left of a 2m deadline", left)
	}
	if r.GetRuntimeVersion() != "kept" {
		t.Errorf("metadata x-test arrived as %q", r.GetRuntimeVersion())
	}
	t.Logf("the upstream saw a deadline %s away", left.Round(time.Millisecond))
	// A call without a deadline has none upstream either.
	if r, err := c.Version(context.Background(), &runtimeapi.VersionRequest{}); err != nil || r.GetRuntimeName() != "" {
		t.Errorf("without a deadline: %q, %v", r.GetRuntimeName(), err)
	}
}

func population(e *env) (sandbox, other *runtimeapi.PodSandbox, container *runtimeapi.Container) {
	sb, cs := fakecri.Generate(fakecri.Spec{Ready: 3, Running: 3})
	e.fake.SetPopulation(sb, cs)
	return sb[0], sb[1], cs[0]
}

// A held status call waits until its caller's deadline and fails as a hung
// runtime's does; calls of other ids and methods go on meanwhile; after
// release the next call, and one already waiting, are forwarded.
func TestHold(t *testing.T) {
	e := newEnv(t, fakecri.Options{})
	sb, other, c := population(e)
	release := e.proxy.Hold("PodSandboxStatus", sb.GetId())
	defer release()
	releaseC := e.proxy.Hold(ContainerStatus, c.GetId())
	defer releaseC()

	const deadline = 2 * time.Second
	start := time.Now()
	var wg sync.WaitGroup
	var heldErr, heldCErr error
	var heldTook time.Duration
	wg.Add(2)
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		_, heldErr = e.via.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.GetId()})
		heldTook = time.Since(start)
	}()
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		_, heldCErr = e.via.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.GetId()})
	}()
	// Meanwhile: another sandbox, a list, the same container's sandbox.
	waitHolding(t, e.proxy, "PodSandboxStatus", 1)
	ctx := ctxTimeout(t, time.Minute)
	if _, err := e.via.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: other.GetId()}); err != nil {
		t.Errorf("another sandbox's status: %v", err)
	}
	if _, err := e.via.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); err != nil {
		t.Errorf("a list beside the held calls: %v", err)
	}
	if time.Since(start) >= deadline {
		t.Errorf("the calls beside the held ones took until the held ones' deadline")
	}
	wg.Wait()
	for name, err := range map[string]error{"PodSandboxStatus": heldErr, "ContainerStatus": heldCErr} {
		if status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("held %s: %v, want DeadlineExceeded", name, err)
		}
	}
	if heldTook < deadline {
		t.Errorf("the held call ended after %s, before its %s deadline", heldTook, deadline)
	}
	t.Logf("held PodSandboxStatus: %v after %s (deadline %s)", heldErr, heldTook.Round(time.Millisecond), deadline)
	// The count drops as the proxy's handler returns, which may be just
	// after the caller has its answer.
	for wait := time.Now().Add(30 * time.Second); e.proxy.Holding("PodSandboxStatus") != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(wait) {
			t.Fatalf("%d calls still counted as held 30s after their deadline", e.proxy.Holding("PodSandboxStatus"))
		}
	}

	// A call waiting when release comes is forwarded, and so are later ones.
	got := make(chan error, 1)
	go func() {
		_, err := e.via.PodSandboxStatus(ctxTimeout(t, time.Minute), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.GetId()})
		got <- err
	}()
	waitHolding(t, e.proxy, PodSandboxStatus, 1)
	release()
	if err := <-got; err != nil {
		t.Errorf("the held call after release: %v", err)
	}
	if r, err := e.via.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.GetId()}); err != nil || r.GetStatus().GetId() != sb.GetId() {
		t.Errorf("after release: %v, %v", r, err)
	}
	if n := e.proxy.Calls("PodSandboxStatus"); n != 4 {
		t.Errorf("Calls(PodSandboxStatus) = %d, want 4", n)
	}
	if n := e.fake.Calls("PodSandboxStatus"); n != 3 {
		t.Errorf("the runtime got %d PodSandboxStatus calls, want 3 (the one that timed out in the proxy never reached it)", n)
	}
}

// A hold of a whole method (no id) holds every call of it.
func TestHoldMethod(t *testing.T) {
	e := newEnv(t, fakecri.Options{})
	release := e.proxy.Hold("ListContainers", "")
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := e.via.ListContainers(ctx, &runtimeapi.ListContainersRequest{}); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("held ListContainers: %v", err)
	}
	release()
	if _, err := e.via.ListContainers(ctxTimeout(t, time.Minute), &runtimeapi.ListContainersRequest{}); err != nil {
		t.Errorf("released: %v", err)
	}
}

func waitHolding(t *testing.T, p *Proxy, method string, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for p.Holding(method) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls of %s held after 30s, want %d", p.Holding(method), method, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Every call of a delayed method waits; the delay's undo ends it; a
// deadline shorter than the delay fails the call.
func TestDelay(t *testing.T) {
	e := newEnv(t, fakecri.Options{})
	_, _, c := population(e)
	ctx := ctxTimeout(t, time.Minute)
	undo := e.proxy.Delay("ContainerStatus", 300*time.Millisecond)
	for i := 0; i < 3; i++ {
		start := time.Now()
		if _, err := e.via.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.GetId()}); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took < 300*time.Millisecond {
			t.Errorf("a delayed call took %s", took)
		}
	}
	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := e.via.ContainerStatus(short, &runtimeapi.ContainerStatusRequest{ContainerId: c.GetId()}); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("a delayed call past its deadline: %v", err)
	}
	undo()
	// Long enough that no loaded machine takes it for an undelayed call.
	undo = e.proxy.Delay("ContainerStatus", 30*time.Second)
	undo()
	start := time.Now()
	if _, err := e.via.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.GetId()}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("a call after undo took %s", took)
	}
	if _, err := e.via.ListContainers(ctx, &runtimeapi.ListContainersRequest{}); err != nil {
		t.Fatal(err)
	}
}

// Close lets held calls go (to the runtime, or failing as the proxy goes)
// instead of leaving them to their deadline.
func TestCloseReleases(t *testing.T) {
	dir := t.TempDir()
	fake, err := fakecri.Start(filepath.Join(dir, "cri.sock"), fakecri.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Stop()
	sb, cs := fakecri.Generate(fakecri.Spec{Ready: 1})
	fake.SetPopulation(sb, cs)
	p, err := Start(filepath.Join(dir, "proxy.sock"), fake.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	p.Hold("PodSandboxStatus", sb[0].GetId())
	p.Delay("Version", time.Hour)
	c := runtimeapi.NewRuntimeServiceClient(dial(t, p.Endpoint()))
	errs := make(chan error, 2)
	ctx := ctxTimeout(t, 10*time.Minute)
	go func() {
		_, err := c.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb[0].GetId()})
		errs <- err
	}()
	go func() {
		_, err := c.Version(ctx, &runtimeapi.VersionRequest{})
		errs <- err
	}()
	waitHolding(t, p, "PodSandboxStatus", 1)
	for p.Calls("Version") == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	for i := 0; i < 2; i++ {
		select {
		case err := <-errs:
			t.Logf("a held call after Close: %v", err)
		case <-time.After(time.Minute):
			t.Fatal("a held call still waits a minute after Close")
		}
	}
	t.Logf("Close released the held calls in %s", time.Since(start).Round(time.Millisecond))
	if _, err := os.Stat(p.Path); !os.IsNotExist(err) {
		t.Errorf("the socket is still there: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}
