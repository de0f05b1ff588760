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

// Package fakecri is an in-process CRI runtime service on a unix socket for
// tests and benchmarks: real gRPC and protobuf, a send limit like
// containerd's, configurable populations, delays and hangs, and a count of
// every call it received.
package fakecri

import (
	"context"
	"fmt"
	"net"
	"os"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// DefaultMaxSendBytes is containerd's and cri-dockerd's send limit.
const DefaultMaxSendBytes = kubecontainer.GRPCLimitBytes

// Options configure a server.
type Options struct {
	MaxSendBytes int // 0: DefaultMaxSendBytes
	// Streaming makes StreamContainers/StreamPodSandboxes work; otherwise
	// they answer Unimplemented like containerd < 2.4.
	Streaming bool
	// StreamBatch is the number of items per streamed message (containerd: 5000).
	StreamBatch int
	// RejectUnknownFilter answers a state=UNKNOWN container filter with an
	// error, as cri-dockerd does.
	RejectUnknownFilter bool
	RuntimeName         string
	RuntimeVersion      string
	// OnTheWire maps placeholders to the bytes that replace them in every
	// answer after it is marshalled, each of the same length so that the
	// message stays well formed. It serves what Go protobuf refuses to
	// marshal (a label value that is not UTF-8), as a runtime written in
	// another language may send it.
	OnTheWire map[string]string
}

// Server is a fake CRI runtime service.
type Server struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	opts Options
	srv  *grpc.Server
	lis  net.Listener
	Path string

	mu         sync.RWMutex
	sandboxes  []*runtimeapi.PodSandbox
	containers []*runtimeapi.Container
	delay      time.Duration
	block      chan struct{} // non-nil: every call waits for it to close

	calls sync.Map // method -> *atomic.Int64
	hang  sync.Map // sandbox or container id whose status call hangs
	// statusFail: sandbox or container id -> the error its status call answers
	statusFail sync.Map
	fail       sync.Map // short method name (ListContainers) -> error
	// removeFail: container or sandbox id -> the error its removal answers
	// (errHang: hang until the deadline)
	removeFail sync.Map
}

// Fail makes every call of a method (its short name, "ListContainers")
// answer err; a nil err lets it work again.
func (s *Server) Fail(method string, err error) {
	if err == nil {
		s.fail.Delete(method)
		return
	}
	s.fail.Store(method, err)
}

// HangStatus makes PodSandboxStatus / ContainerStatus for these ids hang
// until the caller's deadline, as on a broken (Docker Dead) sandbox.
func (s *Server) HangStatus(ids ...string) {
	for _, id := range ids {
		s.hang.Store(id, true)
	}
}

// UnhangStatus lets the status calls of these ids answer again.
func (s *Server) UnhangStatus(ids ...string) {
	for _, id := range ids {
		s.hang.Delete(id)
	}
}

// FailStatus makes PodSandboxStatus / ContainerStatus for this id answer
// err (NotFound: it went between the list and the call); nil works again.
func (s *Server) FailStatus(id string, err error) {
	if err == nil {
		s.statusFail.Delete(id)
		return
	}
	s.statusFail.Store(id, err)
}

func (s *Server) hangIfAsked(ctx context.Context, id string) error {
	if err, ok := s.statusFail.Load(id); ok {
		return err.(error)
	}
	if _, ok := s.hang.Load(id); ok {
		<-ctx.Done()
		return status.FromContextError(ctx.Err()).Err()
	}
	return nil
}

// PodSandboxStatus implements the CRI.
func (s *Server) PodSandboxStatus(ctx context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	if err := s.hangIfAsked(ctx, req.GetPodSandboxId()); err != nil {
		return nil, err
	}
	for _, sb := range s.filterSandboxes(&runtimeapi.PodSandboxFilter{Id: req.GetPodSandboxId()}) {
		return &runtimeapi.PodSandboxStatusResponse{Status: &runtimeapi.PodSandboxStatus{Id: sb.Id, Metadata: sb.Metadata, State: sb.State, CreatedAt: sb.CreatedAt}}, nil
	}
	return nil, status.Errorf(codes.NotFound, "sandbox %s not found", req.GetPodSandboxId())
}

// ContainerStatus implements the CRI.
func (s *Server) ContainerStatus(ctx context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	if err := s.hangIfAsked(ctx, req.GetContainerId()); err != nil {
		return nil, err
	}
	cs, _ := s.filterContainers(&runtimeapi.ContainerFilter{Id: req.GetContainerId()})
	for _, c := range cs {
		return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: c.Id, Metadata: c.Metadata, State: c.State, CreatedAt: c.CreatedAt}}, nil
	}
	return nil, status.Errorf(codes.NotFound, "container %s not found", req.GetContainerId())
}

// Start listens on a unix socket at path.
func Start(path string, opts Options) (*Server, error) {
	if opts.MaxSendBytes == 0 {
		opts.MaxSendBytes = DefaultMaxSendBytes
	}
	if opts.StreamBatch == 0 {
		opts.StreamBatch = 5000
	}
	if opts.RuntimeName == "" {
		opts.RuntimeName = "fakecri"
	}
	if opts.RuntimeVersion == "" {
		opts.RuntimeVersion = "v0.0.1"
	}
	os.Remove(path)
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	// Stop removes the socket itself. A listener that unlinks on close
	// would, when Stop comes before Serve took it, remove the socket of
	// the next server on the same path as Serve finally closes it.
	lis.(*net.UnixListener).SetUnlinkOnClose(false)
	s := &Server{opts: opts, lis: lis, Path: path}
	sopts := []grpc.ServerOption{
		grpc.MaxSendMsgSize(opts.MaxSendBytes),
		grpc.MaxRecvMsgSize(opts.MaxSendBytes),
		grpc.UnaryInterceptor(s.unary),
		grpc.StreamInterceptor(s.stream),
	}
	if len(opts.OnTheWire) > 0 {
		c, err := newWireCodec(opts.OnTheWire)
		if err != nil {
			lis.Close()
			return nil, err
		}
		sopts = append(sopts, grpc.ForceServerCodecV2(c))
	}
	s.srv = grpc.NewServer(sopts...)
	runtimeapi.RegisterRuntimeServiceServer(s.srv, s)
	// crictl checks that an image service answers on the same socket.
	runtimeapi.RegisterImageServiceServer(s.srv, imageService{})
	go s.srv.Serve(lis)
	return s, nil
}

// Endpoint is the unix:// URL of the server.
func (s *Server) Endpoint() string { return "unix://" + s.Path }

// Stop stops the server, failing calls in flight.
func (s *Server) Stop() {
	s.Unblock()
	s.srv.Stop()
	os.Remove(s.Path)
}

// SetPopulation replaces what the server lists.
func (s *Server) SetPopulation(sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sandboxes, s.containers = sandboxes, containers
}

// SetDelay makes every call take at least d.
func (s *Server) SetDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
}

// Block makes every call hang until Unblock or the caller's deadline.
func (s *Server) Block() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.block == nil {
		s.block = make(chan struct{})
	}
}

// Unblock releases hung calls.
func (s *Server) Unblock() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.block != nil {
		close(s.block)
		s.block = nil
	}
}

// Calls returns how many calls of a method (short name, e.g.
// "ListContainers") the server received.
func (s *Server) Calls(method string) int64 {
	v, ok := s.calls.Load("/runtime.v1.RuntimeService/" + method)
	if !ok {
		return 0
	}
	return v.(*atomic.Int64).Load()
}

// TotalCalls returns the number of calls of any method.
func (s *Server) TotalCalls() int64 {
	var n int64
	s.calls.Range(func(_, v any) bool { n += v.(*atomic.Int64).Load(); return true })
	return n
}

func (s *Server) count(method string) {
	v, _ := s.calls.LoadOrStore(method, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func (s *Server) wait(ctx context.Context) error {
	s.mu.RLock()
	delay, block := s.delay, s.block
	s.mu.RUnlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	return nil
}

func (s *Server) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	s.count(info.FullMethod)
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	if err, ok := s.fail.Load(path.Base(info.FullMethod)); ok {
		return nil, err.(error)
	}
	return h(ctx, req)
}

func (s *Server) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	s.count(info.FullMethod)
	if err := s.wait(ss.Context()); err != nil {
		return err
	}
	return h(srv, ss)
}

// Version implements the CRI.
func (s *Server) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: s.opts.RuntimeName,
		RuntimeVersion: s.opts.RuntimeVersion, RuntimeApiVersion: "v1"}, nil
}

func matchLabels(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func (s *Server) filterSandboxes(f *runtimeapi.PodSandboxFilter) []*runtimeapi.PodSandbox {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if f == nil {
		return s.sandboxes
	}
	var out []*runtimeapi.PodSandbox
	for _, sb := range s.sandboxes {
		if f.GetId() != "" && sb.GetId() != f.GetId() {
			continue
		}
		if f.GetState() != nil && sb.GetState() != f.GetState().GetState() {
			continue
		}
		if !matchLabels(f.GetLabelSelector(), sb.GetLabels()) {
			continue
		}
		out = append(out, sb)
	}
	return out
}

func (s *Server) filterContainers(f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	if s.opts.RejectUnknownFilter && f.GetState() != nil && f.GetState().GetState() == runtimeapi.ContainerState_CONTAINER_UNKNOWN {
		return nil, status.Error(codes.Unknown, `Error response from daemon: invalid filter 'status=unknown'`)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if f == nil || (f.GetId() == "" && f.GetState() == nil && f.GetPodSandboxId() == "" && len(f.GetLabelSelector()) == 0) {
		return s.containers, nil
	}
	var out []*runtimeapi.Container
	for _, c := range s.containers {
		if f.GetId() != "" && c.GetId() != f.GetId() {
			continue
		}
		if f.GetState() != nil && c.GetState() != f.GetState().GetState() {
			continue
		}
		if f.GetPodSandboxId() != "" && c.GetPodSandboxId() != f.GetPodSandboxId() {
			continue
		}
		if !matchLabels(f.GetLabelSelector(), c.GetLabels()) {
			continue
		}
		out = append(out, c)
	}
	return out, nil
}

// ListPodSandbox implements the CRI.
func (s *Server) ListPodSandbox(_ context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	return &runtimeapi.ListPodSandboxResponse{Items: s.filterSandboxes(req.GetFilter())}, nil
}

// ListContainers implements the CRI.
func (s *Server) ListContainers(_ context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	cs, err := s.filterContainers(req.GetFilter())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ListContainersResponse{Containers: cs}, nil
}

// StreamPodSandboxes implements CRI list streaming when enabled.
func (s *Server) StreamPodSandboxes(req *runtimeapi.StreamPodSandboxesRequest, st grpc.ServerStreamingServer[runtimeapi.StreamPodSandboxesResponse]) error {
	if !s.opts.Streaming {
		return status.Error(codes.Unimplemented, "method StreamPodSandboxes not implemented")
	}
	items := s.filterSandboxes(req.GetFilter())
	for i := 0; i < len(items); i += s.opts.StreamBatch {
		if err := st.Send(&runtimeapi.StreamPodSandboxesResponse{PodSandboxes: items[i:min(i+s.opts.StreamBatch, len(items))]}); err != nil {
			return err
		}
	}
	return nil
}

// StreamContainers implements CRI list streaming when enabled.
func (s *Server) StreamContainers(req *runtimeapi.StreamContainersRequest, st grpc.ServerStreamingServer[runtimeapi.StreamContainersResponse]) error {
	if !s.opts.Streaming {
		return status.Error(codes.Unimplemented, "method StreamContainers not implemented")
	}
	items, err := s.filterContainers(req.GetFilter())
	if err != nil {
		return err
	}
	for i := 0; i < len(items); i += s.opts.StreamBatch {
		if err := st.Send(&runtimeapi.StreamContainersResponse{Containers: items[i:min(i+s.opts.StreamBatch, len(items))]}); err != nil {
			return err
		}
	}
	return nil
}

// FailRemove makes the removal of these ids answer err (nil: work again),
// and HangRemove makes it hang until the caller's deadline, as a removal
// that waits on a busy filesystem does.
func (s *Server) FailRemove(err error, ids ...string) {
	for _, id := range ids {
		if err == nil {
			s.removeFail.Delete(id)
		} else {
			s.removeFail.Store(id, err)
		}
	}
}

// HangRemove makes the removal of these ids hang until the caller's deadline.
func (s *Server) HangRemove(ids ...string) {
	for _, id := range ids {
		s.removeFail.Store(id, errHang)
	}
}

var errHang = status.Error(codes.Internal, "hang")

func (s *Server) removeFailure(ctx context.Context, id string) error {
	v, ok := s.removeFail.Load(id)
	if !ok {
		return nil
	}
	if v.(error) == errHang {
		<-ctx.Done()
		return status.FromContextError(ctx.Err()).Err()
	}
	return v.(error)
}

// RemoveContainer removes a container, a running one too (as the CRI says
// and containerd does: it is stopped first); like containerd, an id it does
// not know is a success.
func (s *Server) RemoveContainer(ctx context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	if err := s.removeFailure(ctx, req.GetContainerId()); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, c := range s.containers {
		if c.GetId() == req.GetContainerId() {
			s.containers = append(s.containers[:i:i], s.containers[i+1:]...)
			break
		}
	}
	return &runtimeapi.RemoveContainerResponse{}, nil
}

// RemovePodSandbox removes a sandbox and, as containerd does, every
// container still in it, a ready one too (containerd stops it first).
func (s *Server) RemovePodSandbox(ctx context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	id := req.GetPodSandboxId()
	if err := s.removeFailure(ctx, id); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, sb := range s.sandboxes {
		if sb.GetId() != id {
			continue
		}
		s.sandboxes = append(s.sandboxes[:i:i], s.sandboxes[i+1:]...)
		kept := s.containers[:0:0]
		for _, c := range s.containers {
			if c.GetPodSandboxId() != id {
				kept = append(kept, c)
			}
		}
		s.containers = kept
		break
	}
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

// Population returns what the server holds now.
func (s *Server) Population() ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append([]*runtimeapi.PodSandbox(nil), s.sandboxes...), append([]*runtimeapi.Container(nil), s.containers...)
}

type imageService struct {
	runtimeapi.UnimplementedImageServiceServer
}

func (imageService) ListImages(context.Context, *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	return &runtimeapi.ListImagesResponse{}, nil
}

func (imageService) ImageFsInfo(context.Context, *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	return &runtimeapi.ImageFsInfoResponse{}, nil
}
