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

// Package docker performs a relist through the Docker Engine API, for nodes
// where the kubelet talks to Docker (cri-dockerd, or dockershim before it).
package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
	"github.com/docker/go-connections/sockets"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// DefaultMaxBytes bounds a Docker answer when Config.MaxBytes is not set:
// the default of --runtime.max-recv-bytes.
const DefaultMaxBytes = 256 << 20

// Config configures a Docker client.
type Config struct {
	Host    string        // unix:///var/run/docker.sock
	Timeout time.Duration // deadline of each call
	// MaxBytes bounds the body of every answer, the container list's above
	// all (--runtime.max-recv-bytes, as the CRI client's receive limit); 0
	// means DefaultMaxBytes.
	MaxBytes int64
	Logger   *slog.Logger
	// ProbeMax and ProbeTimeout bound the inspect calls of Inventory: at
	// most ProbeMax suspects, each within ProbeTimeout.
	ProbeMax     int
	ProbeTimeout time.Duration
}

// engine is all of the Docker Engine API the exporter calls. Nothing else of
// the moby client is reachable from the rest of the package, and the client
// behind it is guarded besides (readonly.go), so a call added here by
// mistake still cannot change the daemon.
type engine interface {
	ServerVersion(ctx context.Context) (types.Version, error)
	ContainerInspect(ctx context.Context, id string) (container.InspectResponse, error)
	ImageInspect(ctx context.Context, id string, opts ...client.ImageInspectOption) (image.InspectResponse, error)
	NegotiateAPIVersion(ctx context.Context)
	ClientVersion() string
	Close() error
}

// Client lists containers through the Docker API, plain GET requests only.
type Client struct {
	cfg Config
	api engine
	// The container list is read with http, the client under api, so that
	// it can be decoded as it streams in; moby decodes a whole answer.
	http       *http.Client
	listURL    url.URL // without the API version
	negotiated atomic.Bool
}

// New prepares a client; it does not connect.
func New(cfg Config) (*Client, error) {
	c, _, err := newClient(cfg, readOnlyPolicy)
	return c, err
}

// newClient builds a client whose every request passes p; it returns the
// moby client under it too, for the gc command's removals.
func newClient(cfg Config, p policy) (*Client, *client.Client, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	u, err := client.ParseHostURL(cfg.Host)
	if err != nil {
		return nil, nil, fmt.Errorf("docker host %q: %w", cfg.Host, err)
	}
	tr := &http.Transport{MaxIdleConns: 2, IdleConnTimeout: 30 * time.Second}
	if err := sockets.ConfigureTransport(tr, u.Scheme, u.Host); err != nil {
		return nil, nil, fmt.Errorf("docker host %q: %w", cfg.Host, err)
	}
	// moby's hijacking calls dial through tr.DialContext because tr is an
	// *http.Transport without a TLS config (client.Client.dialer); wrapped in
	// anything else, they would dial the socket themselves.
	tr.DialContext = guardDial(tr.DialContext, p)
	hc := &http.Client{Transport: tr}
	api, err := client.NewClientWithOpts(
		client.WithHost(cfg.Host),
		// Replaces the default client after WithHost set the address.
		client.WithHTTPClient(hc),
		client.WithAPIVersionNegotiation(),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("docker host %q: %w", cfg.Host, err)
	}
	// moby has kept tr as its base transport and wrapped hc's in its tracing
	// transport; wrap that in turn, so that every request is checked first
	// and refused with a clear error.
	hc.Transport = readOnlyTransport{next: hc.Transport, maxBytes: cfg.MaxBytes, policy: p}
	host := u.Host
	if u.Scheme == "unix" || u.Scheme == "npipe" {
		host = client.DummyHost
	}
	return &Client{cfg: cfg, api: api, http: hc,
		listURL: url.URL{Scheme: "http", Host: host, Path: u.Path, RawQuery: "all=1"}}, api, nil
}

// Close releases idle connections.
func (c *Client) Close() error { return c.api.Close() }

// Info asks the daemon for its version.
func (c *Client) Info(ctx context.Context) (kubecontainer.Info, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	v, err := c.api.ServerVersion(ctx)
	if err != nil {
		return kubecontainer.Info{}, classify(fmt.Errorf("version of docker at %s: %w", c.cfg.Host, err))
	}
	return kubecontainer.Info{Runtime: "docker", Version: v.Version, APIVersion: v.APIVersion, Endpoint: c.cfg.Host}, nil
}

// View is what one Docker container list yields.
type View struct {
	// Docker counts every container by Docker's own state.
	Docker map[string]int
	// The CRI view: containers and sandboxes cri-dockerd would list, by the
	// state it would report, and the estimated serialized size of its answers.
	Containers       map[string]int
	Sandboxes        map[string]int
	ContainersBytes  int64
	SandboxesBytes   int64
	Unconvertible    int // kubernetes-labelled containers whose names cri-dockerd cannot parse (it skips them too)
	ListDuration     time.Duration
	ContainersListed int
}

// list lists every container once (GET /containers/json?all=1), the one
// call every Docker path reads the node through, and hands fn each
// container, converted, as it is decoded: neither the answer nor the list is
// ever held whole. The duration covers the call, the decoding and the
// conversion, as cri-dockerd's list covers its Docker call and conversion.
func (c *Client) list(ctx context.Context, fn func(*Entry)) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	start := time.Now()
	err := c.streamList(ctx, "", fn)
	d := time.Since(start)
	if err != nil {
		return d, classify(fmt.Errorf("list containers on docker at %s: %w", c.cfg.Host, err))
	}
	return d, nil
}

// streamList lists the containers matching filters (the JSON of Docker's
// filters parameter; "" for every container).
func (c *Client) streamList(ctx context.Context, filters string, fn func(*Entry)) error {
	// What moby does before its first call, done again after a failure: the
	// daemon may have been replaced by an older one. A failed ping leaves the
	// version as it was, and the list below says why. An answer over the cap
	// came from a daemon that understood the request: no new ping for it.
	if !c.negotiated.Load() {
		c.api.NegotiateAPIVersion(ctx)
	}
	err := c.get(ctx, filters, fn)
	var large *TooLargeError
	c.negotiated.Store(err == nil || errors.As(err, &large))
	return err
}

func (c *Client) get(ctx context.Context, filters string, fn func(*Entry)) error {
	u := c.listURL
	u.Path = strings.TrimSuffix(u.Path, "/") + "/v" + strings.TrimPrefix(c.api.ClientVersion(), "v") + "/containers/json"
	if filters != "" {
		u.RawQuery += "&filters=" + url.QueryEscape(filters)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	return decodeList(resp.Body, func(s *Summary) {
		e := convert(s)
		fn(&e)
	})
}

// List lists every container once and aggregates both views.
func (c *Client) List(ctx context.Context) (*View, error) {
	v := newView()
	d, err := c.list(ctx, v.add)
	if err != nil {
		return nil, err
	}
	v.ListDuration = d
	return v, nil
}

// Summarize aggregates a Docker container list into both views.
func Summarize(list []Summary) *View {
	v := newView()
	for i := range list {
		e := convert(&list[i])
		v.add(&e)
	}
	return v
}

func newView() *View {
	v := &View{Docker: map[string]int{}, Containers: map[string]int{}, Sandboxes: map[string]int{}}
	for _, s := range kubecontainer.DockerStates {
		v.Docker[s] = 0
	}
	for _, s := range kubecontainer.ContainerStates {
		v.Containers[s] = 0
	}
	for _, s := range kubecontainer.SandboxStates {
		v.Sandboxes[s] = 0
	}
	return v
}

// add counts one container in both views.
func (v *View) add(e *Entry) {
	v.ContainersListed++
	v.Docker[e.Docker.State]++
	switch {
	case e.Unconvertible:
		v.Unconvertible++
	case e.Container != nil:
		v.Containers[kubecontainer.ContainerStateName(e.Container.GetState())]++
		v.ContainersBytes += e.Bytes
	case e.Sandbox != nil:
		v.Sandboxes[kubecontainer.SandboxStateName(e.Sandbox.GetState())]++
		v.SandboxesBytes += e.Bytes
	}
}

// Relist makes the Docker API stand in for the kubelet's CRI lists. The
// payload is an estimate: the CRI messages cri-dockerd would build from the
// same containers, serialized.
func (c *Client) Relist(ctx context.Context) *kubecontainer.Snapshot {
	snap := kubecontainer.NewSnapshot(time.Now())
	v, err := c.List(ctx)
	snap.Duration = time.Since(snap.Start)
	if err != nil {
		snap.Err = err
		snap.DockerErr = err
		for _, rpc := range []string{kubecontainer.RPCListPodSandbox, kubecontainer.RPCListContainers} {
			snap.RPCs[rpc] = kubecontainer.RPCStat{Duration: snap.Duration, Err: err, Estimated: true}
		}
		return snap
	}
	snap.RPCs[kubecontainer.RPCListPodSandbox] = kubecontainer.RPCStat{Duration: v.ListDuration, PayloadBytes: v.SandboxesBytes, PayloadKnown: true, Estimated: true}
	snap.RPCs[kubecontainer.RPCListContainers] = kubecontainer.RPCStat{Duration: v.ListDuration, PayloadBytes: v.ContainersBytes, PayloadKnown: true, Estimated: true}
	snap.Containers, snap.Sandboxes, snap.DockerContainers = v.Containers, v.Sandboxes, v.Docker
	snap.Counted = true
	return snap
}

// codedError gives Docker errors a bounded code for pleg_relist_errors_total.
type codedError struct {
	err  error
	code string
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }
func (e *codedError) Code() string  { return e.code }

func classify(err error) error {
	code := "Unknown"
	var na *ErrNotAllowed
	var large *TooLargeError
	var dial *net.OpError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		code = kubecontainer.CodeDeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = "Canceled"
	case errdefs.IsNotFound(err):
		// A 404 of an inspect: the container went after it was listed.
		code = kubecontainer.CodeNotFound
	case errors.As(err, &na):
		code = na.Code()
	case errors.As(err, &large):
		code = large.Code()
	case client.IsErrConnectionFailed(err), errors.As(err, &dial) && dial.Op == "dial":
		code = kubecontainer.CodeUnavailable
	}
	return &codedError{err: err, code: code}
}
