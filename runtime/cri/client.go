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

// Package cri performs the kubelet's relist over the Container Runtime
// Interface (containerd, CRI-O, cri-dockerd).
package cri

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// Config configures a CRI client.
type Config struct {
	// Endpoint is the runtime's socket as a URL, unix:///run/containerd/containerd.sock.
	Endpoint string
	// MaxRecvBytes is our own receive limit. It is far above the kubelet's
	// 16 MiB so that a runtime which does send an oversized answer is still
	// measured.
	MaxRecvBytes int
	// Timeout is the deadline of each call, like the kubelet's
	// --runtime-request-timeout.
	Timeout time.Duration
	// NamespacesTop > 0 breaks the containers down by namespace, top N.
	NamespacesTop int
	// ProbeMax > 0 makes each relist remember the notready sandboxes and
	// unknown containers for Probe, which checks at most ProbeMax of them.
	ProbeMax     int
	ProbeTimeout time.Duration
	// KubeletLimitBytes is the kubelet's receive limit (16 MiB when 0): a
	// list answer within it needs no streamed measurement.
	KubeletLimitBytes int
}

// Client relists through one CRI endpoint. It keeps no list between relists.
type Client struct {
	cfg  Config
	conn *grpc.ClientConn
	rs   runtimeapi.RuntimeServiceClient

	mu        sync.Mutex
	streaming string // "true", "false" or "" (not known)
	// candidates for the status probes: those of the latest relist, plus
	// the earlier ones a partial listing did not see.
	candidates  []candidate
	probeCursor candidate
	// changes compares each relist's items with the previous complete
	// relist's (what the kubelet's PLEG turns into events); relistMu keeps
	// relists one at a time around it.
	relistMu sync.Mutex
	changes  *kubecontainer.Changes
	// unknownFilterRejected is set when the runtime refused a state=UNKNOWN
	// filter (cri-dockerd turns it into Docker's invalid status=unknown).
	unknownFilterRejected bool
}

// SocketPath validates a unix:// endpoint and returns the socket path.
func SocketPath(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", fmt.Errorf("runtime endpoint %q: %w", endpoint, err)
	}
	if u.Scheme == "" {
		return "", fmt.Errorf("runtime endpoint %q has no scheme: write unix://%s", endpoint, endpoint)
	}
	if u.Scheme != "unix" {
		return "", fmt.Errorf("runtime endpoint %q: scheme %q is not supported, only unix:// is", endpoint, u.Scheme)
	}
	p := u.Path
	if u.Host != "" { // unix://relative/path
		p = u.Host + u.Path
	}
	if p == "" {
		return "", fmt.Errorf("runtime endpoint %q has no socket path", endpoint)
	}
	return p, nil
}

// New prepares a client. It does not connect: gRPC connects lazily and
// reconnects with backoff, so a runtime that is absent now is picked up when
// its socket appears.
func New(cfg Config) (*Client, error) { return newClient(cfg, readOnly) }

func newClient(cfg Config, rule allowList) (*Client, error) {
	path, err := SocketPath(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient("unix://"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithAuthority("localhost"),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(cfg.MaxRecvBytes)),
		// The kubelet's own backoff (cri-client): 100 ms doubling to 3 s.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 3 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
		grpc.WithChainUnaryInterceptor(rule.unary),
		grpc.WithChainStreamInterceptor(rule.stream),
	)
	if err != nil {
		return nil, fmt.Errorf("runtime endpoint %s: %w", cfg.Endpoint, err)
	}
	return &Client{cfg: cfg, conn: conn, rs: runtimeapi.NewRuntimeServiceClient(conn), changes: kubecontainer.NewChanges()}, nil
}

// Conn exposes the connection (tests use it to prove the allow-list).
func (c *Client) Conn() *grpc.ClientConn { return c.conn }

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

func (c *Client) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.Timeout)
}

// Info asks the runtime's name and version, and whether it streams lists.
func (c *Client) Info(ctx context.Context) (kubecontainer.Info, error) {
	cctx, cancel := c.call(ctx)
	defer cancel()
	v, err := c.rs.Version(cctx, &runtimeapi.VersionRequest{})
	if err != nil {
		return kubecontainer.Info{}, fmt.Errorf("version of %s: %w", c.cfg.Endpoint, err)
	}
	info := kubecontainer.Info{
		Runtime:    strings.ToLower(v.GetRuntimeName()),
		Version:    v.GetRuntimeVersion(),
		APIVersion: v.GetRuntimeApiVersion(),
		Endpoint:   c.cfg.Endpoint,
	}
	info.Streaming = c.probeStreaming(ctx)
	return info, nil
}

// probeStreaming asks for a stream that matches nothing: an Unimplemented
// answer means the runtime has no CRI list streaming (KEP-5825).
func (c *Client) probeStreaming(ctx context.Context) string {
	cctx, cancel := c.call(ctx)
	defer cancel()
	st, err := c.rs.StreamPodSandboxes(cctx, &runtimeapi.StreamPodSandboxesRequest{
		Filter: &runtimeapi.PodSandboxFilter{Id: "pleg-exporter-streaming-probe"},
	})
	if err == nil {
		for {
			if _, err = st.Recv(); err != nil {
				break
			}
		}
		if errors.Is(err, io.EOF) {
			err = nil
		}
	}
	res := ""
	switch {
	case err == nil:
		res = "true"
	case status.Code(err) == codes.Unimplemented:
		res = "false"
	}
	c.mu.Lock()
	c.streaming = res
	c.mu.Unlock()
	return res
}

func (c *Client) kubeletLimit() int {
	if c.cfg.KubeletLimitBytes > 0 {
		return c.cfg.KubeletLimitBytes
	}
	return kubecontainer.GRPCLimitBytes
}

func (c *Client) streams() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.streaming == "true"
}

// Relist issues exactly the kubelet's GetPods(all=true) through the lister
// and keeps nothing but counts and sizes. Past the limit the counts come from
// the lister's fallback.
func (c *Client) Relist(ctx context.Context) *kubecontainer.Snapshot {
	c.relistMu.Lock()
	defer c.relistMu.Unlock()
	var tally kubecontainer.NamespaceTally
	// Every relist reads each item's id (and a container's sandbox, a
	// sandbox's pod) for the churn between relists.
	ch := c.changes
	ch.Begin()
	v := &Visitor{
		ContainerFields: FieldID | FieldSandboxID,
		SandboxFields:   FieldID | FieldIdentity,
		ResetSandboxes:  ch.ResetSandboxes,
		ResetContainers: ch.ResetContainers,
	}
	if c.cfg.NamespacesTop > 0 {
		tally = kubecontainer.NamespaceTally{}
		v.ContainerFields |= FieldNamespace
		v.ResetContainers = func() { ch.ResetContainers(); clear(tally) }
	}
	probes := c.cfg.ProbeMax > 0
	var sbCands, ctCands *candidateScan
	if probes {
		c.mu.Lock()
		sbCands = newCandidateScan(kubecontainer.ProbeSandbox, c.candidates)
		ctCands = newCandidateScan(kubecontainer.ProbeContainer, c.candidates)
		c.mu.Unlock()
		v.ContainerFields |= FieldID | FieldCreated
		v.SandboxFields |= FieldID | FieldCreated
		resetSandboxes, resetContainers := v.ResetSandboxes, v.ResetContainers
		v.ResetSandboxes = func() { resetSandboxes(); sbCands.reset() }
		v.ResetContainers = func() { resetContainers(); ctCands.reset() }
	}
	v.Sandbox = func(it *Item) {
		ch.Sandbox(it.ID, it.PodUID, it.State)
		if probes {
			sbCands.visit(it, it.State != int32(runtimeapi.PodSandboxState_SANDBOX_READY))
		}
	}
	v.Container = func(it *Item) {
		ch.Container(it.ID, it.SandboxID, it.State)
		if tally != nil {
			tally.Add(string(it.Namespace), containerState(runtimeapi.ContainerState(it.State)), it.Bytes)
		}
		if probes {
			ctCands.visit(it, it.State == int32(runtimeapi.ContainerState_CONTAINER_UNKNOWN))
		}
	}
	l := c.List(ctx, v)
	snap := c.snapshot(l, tally)
	if probes {
		// The candidates come from whatever listed the items, the fallback
		// included: past the limit is when the hanging sandboxes pile up. A
		// listing that missed some items keeps the candidates it did not
		// see (unknown containers on cri-dockerd, a list that failed).
		cands := append(sbCands.result(l.SandboxesListed),
			ctCands.result(l.ContainersListed && !l.ContainersIncomplete)...)
		c.mu.Lock()
		c.candidates = cands
		c.mu.Unlock()
	}
	return snap
}

// snapshot is what the relist l counted, with the churn since the
// previous relist and the namespaces' tally.
func (c *Client) snapshot(l *Listing, tally kubecontainer.NamespaceTally) *kubecontainer.Snapshot {
	snap := kubecontainer.NewSnapshot(l.Start)
	snap.Duration, snap.RPCs, snap.Err = l.Duration, l.RPCs, l.Err
	if l.SandboxesListed {
		snap.Sandboxes = l.SandboxCounts()
	}
	if l.ContainersListed {
		snap.Containers = l.ContainerCounts()
		if tally != nil {
			snap.Namespaces = tally.Top(c.cfg.NamespacesTop)
		}
	}
	snap.Fallback, snap.FallbackDuration = l.Fallback, l.FallbackDuration
	snap.ContainersIncomplete = l.ContainersIncomplete
	snap.Counted = l.Complete()
	// A listing without unknown containers (cri-dockerd's fallback) would
	// count them all as gone: not compared.
	snap.ChangedItems, snap.ChangedPods, snap.ChangesKnown = c.changes.End(snap.Counted && !l.ContainersIncomplete)
	snap.PodUIDs = c.changes.PodUIDs()
	snap.StreamAccepted = c.streamAccepted(snap)
	return snap
}

// streamAccepted tells whether a kubelet that streams lists would have
// accepted the relist: it failed only because a whole answer was past the
// kubelet's limit, the items were all counted, and every message of both
// lists, streamed, fits.
func (c *Client) streamAccepted(snap *kubecontainer.Snapshot) bool {
	if snap.Err == nil {
		return true
	}
	if !c.streams() || !tooLarge(snap.Err) || !snap.Counted || snap.ContainersIncomplete {
		return false
	}
	for _, rpc := range []string{kubecontainer.RPCListPodSandbox, kubecontainer.RPCListContainers} {
		st, ok := snap.RPCs[rpc]
		if !ok || !st.StreamKnown || st.StreamMessageBytes > int64(c.kubeletLimit()) {
			return false
		}
	}
	return true
}

func rpcStat(d time.Duration, size int64, err error) kubecontainer.RPCStat {
	s := kubecontainer.RPCStat{Duration: d, Err: err}
	if err == nil {
		s.PayloadBytes, s.PayloadKnown = size, true
		return s
	}
	if status.Code(err) == codes.ResourceExhausted {
		if n, _, ok := kubecontainer.ParseMessageSize(status.Convert(err).Message()); ok {
			s.PayloadBytes, s.PayloadKnown = n, true
		}
	}
	return s
}

func tooLarge(err error) bool {
	return err != nil && status.Code(err) == codes.ResourceExhausted
}

var (
	containerState = kubecontainer.ContainerStateName
	sandboxState   = kubecontainer.SandboxStateName
)
