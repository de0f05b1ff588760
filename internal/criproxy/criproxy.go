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

// Package criproxy is a CRI runtime as a test needs it to misbehave: a gRPC
// server on a unix socket that forwards every call, of every service and
// method, to an upstream CRI socket byte for byte, and can hold the status
// calls of chosen sandboxes and containers until their caller's deadline
// (as a runtime does on a broken sandbox) or delay every call of a method.
//
// The kubelet and the exporter both talk to the runtime through it, so each
// sees the same hung call. Nothing is decoded on the way but the id of the
// two status requests: answers keep their exact size (the receive and send
// limits here are far above the 16 MiB the kubelet allows), the upstream's
// errors keep their code and message, and the caller's deadline becomes the
// upstream call's.
package criproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// MaxMessageBytes is the proxy's receive and send limit in both directions:
// far above the kubelet's 16 MiB, so that only the two ends' own limits
// decide what passes.
const MaxMessageBytes = 1 << 30

// The CRI's status methods whose requests the proxy reads an id from.
const (
	PodSandboxStatus = "/runtime.v1.RuntimeService/PodSandboxStatus"
	ContainerStatus  = "/runtime.v1.RuntimeService/ContainerStatus"
)

// Proxy forwards CRI calls from its socket to an upstream one.
type Proxy struct {
	// Path is the proxy's socket.
	Path     string
	upstream *grpc.ClientConn
	srv      *grpc.Server
	lis      net.Listener

	mu     sync.Mutex
	holds  map[holdKey]*hold
	delays map[string]map[int]time.Duration // short method -> id -> delay
	seq    int
	closed chan struct{} // closed by Close: every held or delayed call goes on

	calls   sync.Map // full method -> *atomic.Int64
	holding sync.Map // short method -> *atomic.Int64: calls waiting in a hold now
}

type holdKey struct{ method, id string }

// hold is one Hold: its calls wait until released is closed.
type hold struct {
	released chan struct{}
	once     sync.Once
}

// Start listens on socketPath and forwards to the upstream endpoint
// (unix:///path or a bare socket path).
func Start(socketPath, upstream string) (*Proxy, error) {
	if !strings.Contains(upstream, "://") {
		upstream = "unix://" + upstream
	}
	cc, err := grpc.NewClient(upstream,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(
			grpc.ForceCodecV2(rawCodec{}),
			grpc.MaxCallRecvMsgSize(MaxMessageBytes),
			grpc.MaxCallSendMsgSize(MaxMessageBytes),
		))
	if err != nil {
		return nil, fmt.Errorf("criproxy: upstream %s: %w", upstream, err)
	}
	os.Remove(socketPath)
	lis, err := net.Listen("unix", socketPath)
	if err != nil {
		cc.Close()
		return nil, fmt.Errorf("criproxy: listen on %s: %w", socketPath, err)
	}
	// Close removes the socket itself, once the server has let go of it.
	lis.(*net.UnixListener).SetUnlinkOnClose(false)
	p := &Proxy{
		Path: socketPath, upstream: cc, lis: lis,
		holds: map[holdKey]*hold{}, delays: map[string]map[int]time.Duration{},
		closed: make(chan struct{}),
	}
	p.srv = grpc.NewServer(
		grpc.UnknownServiceHandler(p.forward),
		grpc.ForceServerCodecV2(rawCodec{}),
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		grpc.MaxSendMsgSize(MaxMessageBytes),
	)
	go p.srv.Serve(lis)
	return p, nil
}

// Endpoint is the proxy's unix:// URL.
func (p *Proxy) Endpoint() string { return "unix://" + p.Path }

// shortName is a method's last path element: "PodSandboxStatus" of
// "/runtime.v1.RuntimeService/PodSandboxStatus" or of itself.
func shortName(method string) string { return path.Base(method) }

// Hold makes the calls of method (full or short name) whose request names
// id (the sandbox of PodSandboxStatus, the container of ContainerStatus; an
// empty id: every call of method) wait until their caller's deadline and
// then fail as a hung runtime's do, with DeadlineExceeded, or, once release
// is called, go on to the upstream. Calls waiting when release comes go on
// too. release may be called more than once.
func (p *Proxy) Hold(method, id string) (release func()) {
	k := holdKey{shortName(method), id}
	h := &hold{released: make(chan struct{})}
	p.mu.Lock()
	if old := p.holds[k]; old != nil {
		old.release()
	}
	p.holds[k] = h
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		if p.holds[k] == h {
			delete(p.holds, k)
		}
		p.mu.Unlock()
		h.release()
	}
}

func (h *hold) release() { h.once.Do(func() { close(h.released) }) }

// Delay makes every call of method (full or short name) wait d before it is
// forwarded, or fail as the runtime's would when its caller's deadline comes
// first. Delays of the same method add up; undo takes this one away (calls
// already waiting keep theirs).
func (p *Proxy) Delay(method string, d time.Duration) (undo func()) {
	m := shortName(method)
	p.mu.Lock()
	p.seq++
	id := p.seq
	if p.delays[m] == nil {
		p.delays[m] = map[int]time.Duration{}
	}
	p.delays[m][id] = d
	p.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			delete(p.delays[m], id)
			p.mu.Unlock()
		})
	}
}

// Calls is how many calls of method (full or short name) reached the proxy,
// held, delayed and failed ones included.
func (p *Proxy) Calls(method string) int64 {
	var n int64
	full := strings.HasPrefix(method, "/")
	p.calls.Range(func(k, v any) bool {
		if k.(string) == method || (!full && shortName(k.(string)) == method) {
			n += v.(*atomic.Int64).Load()
		}
		return true
	})
	return n
}

// CallCounts is every method's count so far, by full name.
func (p *Proxy) CallCounts() map[string]int64 {
	out := map[string]int64{}
	p.calls.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

// Holding is how many calls of method (full or short name) wait in a hold now.
func (p *Proxy) Holding(method string) int64 {
	if v, ok := p.holding.Load(shortName(method)); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

// Close releases every held and delayed call (they are forwarded, or fail
// as the upstream connection goes), stops serving and removes the socket.
func (p *Proxy) Close() error {
	p.mu.Lock()
	select {
	case <-p.closed:
		p.mu.Unlock()
		return nil
	default:
	}
	close(p.closed)
	for k, h := range p.holds {
		h.release()
		delete(p.holds, k)
	}
	p.mu.Unlock()
	// Calls in flight end on their own (a long-lived event stream does
	// not): a few seconds, then the rest are cut.
	done := make(chan struct{})
	go func() { p.srv.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.srv.Stop()
		<-done
	}
	err := p.upstream.Close()
	os.Remove(p.Path)
	return err
}

func (p *Proxy) count(method string) {
	v, _ := p.calls.LoadOrStore(method, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

// requestID is the sandbox or container a status request names.
func requestID(method string, req []byte) string {
	switch method {
	case PodSandboxStatus:
		var r runtimeapi.PodSandboxStatusRequest
		if proto.Unmarshal(req, &r) == nil {
			return r.GetPodSandboxId()
		}
	case ContainerStatus:
		var r runtimeapi.ContainerStatusRequest
		if proto.Unmarshal(req, &r) == nil {
			return r.GetContainerId()
		}
	}
	return ""
}

// fault applies the holds and delays that match one call, before it is
// forwarded: nil to go on, else the error to answer.
func (p *Proxy) fault(ctx context.Context, method string, first []byte) error {
	short := shortName(method)
	id := requestID(method, first)
	p.mu.Lock()
	h := p.holds[holdKey{short, ""}]
	if h == nil && id != "" {
		h = p.holds[holdKey{short, id}]
	}
	var delay time.Duration
	for _, d := range p.delays[short] {
		delay += d
	}
	p.mu.Unlock()
	if h != nil {
		v, _ := p.holding.LoadOrStore(short, new(atomic.Int64))
		n := v.(*atomic.Int64)
		n.Add(1)
		select {
		case <-h.released:
		case <-p.closed:
		case <-ctx.Done():
			n.Add(-1)
			// What a runtime that never answers makes the caller see.
			return status.FromContextError(ctx.Err()).Err()
		}
		n.Add(-1)
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-p.closed:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	return nil
}

// streamDesc lets one client stream carry any kind of method: the wire is
// the same, only the upstream's handler knows how many messages it takes
// and sends.
var streamDesc = &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}

// forward is the handler of every method: the downstream's first message,
// the faults, then both directions copied until the upstream ends the call,
// whose status (code, message, details) and metadata go back unchanged.
func (p *Proxy) forward(_ any, down grpc.ServerStream) error {
	method, ok := grpc.MethodFromServerStream(down)
	if !ok {
		return status.Error(codes.Internal, "criproxy: no method")
	}
	p.count(method)
	ctx := down.Context() // its deadline is the downstream's grpc-timeout
	first := new(frame)
	if err := down.RecvMsg(first); err != nil {
		if errors.Is(err, io.EOF) {
			first = nil // a client stream that sent nothing
		} else {
			return err
		}
	}
	var firstBytes []byte
	if first != nil {
		firstBytes = first.b
	}
	if err := p.fault(ctx, method, firstBytes); err != nil {
		return err
	}
	upCtx, cancel := context.WithCancel(metadata.NewOutgoingContext(ctx, forwardedMD(ctx)))
	defer cancel()
	up, err := p.upstream.NewStream(upCtx, streamDesc, method)
	if err != nil {
		return err
	}
	// Downstream to upstream, in the background: the rest of a client
	// stream (nothing, for the CRI's methods), then the half-close. A
	// downstream that breaks off cancels the upstream call.
	go sendUp(first, down, up, cancel)
	// Upstream to downstream, in the foreground.
	headerSent := false
	for {
		m := new(frame)
		err := up.RecvMsg(m)
		if !headerSent {
			headerSent = true
			if h, herr := up.Header(); herr == nil && len(h) > 0 {
				down.SetHeader(h)
			}
		}
		if err != nil {
			down.SetTrailer(up.Trailer())
			if errors.Is(err, io.EOF) {
				return nil
			}
			// The upstream's status error: code, message and details
			// unchanged.
			return err
		}
		if err := down.SendMsg(m); err != nil {
			return err
		}
	}
}

// forwardedMD is the downstream call's metadata the upstream call gets:
// all but the transport headers, which are the new call's own.
func forwardedMD(ctx context.Context) metadata.MD {
	md, _ := metadata.FromIncomingContext(ctx)
	out := metadata.MD{}
	for k, v := range md {
		if strings.HasPrefix(k, ":") || k == "content-type" || k == "user-agent" || strings.HasPrefix(k, "grpc-") || k == "te" {
			continue
		}
		out[k] = v
	}
	return out
}

// sendUp copies downstream to upstream: first (nil when the client sent
// nothing), the rest of a client stream (nothing, for the CRI's methods),
// then the half-close. A downstream that breaks off cancels the upstream
// call.
func sendUp(first *frame, down grpc.ServerStream, up grpc.ClientStream, cancel context.CancelFunc) {
	if first != nil {
		if up.SendMsg(first) != nil {
			return // the upstream's status comes from RecvMsg
		}
		for {
			m := new(frame)
			if err := down.RecvMsg(m); err != nil {
				if !errors.Is(err, io.EOF) {
					cancel()
					return
				}
				break
			}
			if up.SendMsg(m) != nil {
				return
			}
		}
	}
	up.CloseSend()
}

// frame is one message, as the bytes that were on the wire.
type frame struct{ b []byte }

// rawCodec moves messages as bytes, never decoding them. It keeps the
// name of gRPC's own codec, so the content type on both sides stays the
// protobuf one a runtime expects.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	f, ok := v.(*frame)
	if !ok {
		return nil, fmt.Errorf("criproxy: cannot marshal %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(f.b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return fmt.Errorf("criproxy: cannot unmarshal into %T", v)
	}
	f.b = data.Materialize()
	return nil
}

var _ encoding.CodecV2 = rawCodec{}
