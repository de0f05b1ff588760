// Package docker performs a relist through the Docker Engine API, for nodes
// where the kubelet talks to Docker (cri-dockerd, or dockershim before it).
package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/go-connections/sockets"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// Config configures a Docker client.
type Config struct {
	Host    string        // unix:///var/run/docker.sock
	Timeout time.Duration // deadline of each call
	Logger  *slog.Logger
	// ProbeMax and ProbeTimeout bound the inspect calls of Inventory: at
	// most ProbeMax suspects, each within ProbeTimeout.
	ProbeMax     int
	ProbeTimeout time.Duration
}

// Client lists containers through the Docker API, GET requests only.
type Client struct {
	cfg Config
	api *client.Client
}

// New prepares a client; it does not connect.
func New(cfg Config) (*Client, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	u, err := client.ParseHostURL(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("docker host %q: %w", cfg.Host, err)
	}
	tr := &http.Transport{MaxIdleConns: 2, IdleConnTimeout: 30 * time.Second}
	if err := sockets.ConfigureTransport(tr, u.Scheme, u.Host); err != nil {
		return nil, fmt.Errorf("docker host %q: %w", cfg.Host, err)
	}
	api, err := client.NewClientWithOpts(
		client.WithHost(cfg.Host),
		// Replaces the default client after WithHost set the address: every
		// request goes through the read-only transport.
		client.WithHTTPClient(&http.Client{Transport: readOnlyTransport{next: tr}}),
		client.WithAPIVersionNegotiation(),
	)
	if err != nil {
		return nil, fmt.Errorf("docker host %q: %w", cfg.Host, err)
	}
	return &Client{cfg: cfg, api: api}, nil
}

// API exposes the underlying client (tests use it to prove the allow-list).
func (c *Client) API() *client.Client { return c.api }

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
// call every Docker path reads the node through.
func (c *Client) list(ctx context.Context) ([]container.Summary, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	start := time.Now()
	list, err := c.api.ContainerList(ctx, container.ListOptions{All: true})
	d := time.Since(start)
	if err != nil {
		return nil, d, classify(fmt.Errorf("list containers on docker at %s: %w", c.cfg.Host, err))
	}
	return list, d, nil
}

// List lists every container once and aggregates both views.
func (c *Client) List(ctx context.Context) (*View, error) {
	list, d, err := c.list(ctx)
	if err != nil {
		return nil, err
	}
	v := Summarize(list)
	v.ListDuration = d
	return v, nil
}

// Summarize aggregates a Docker container list into both views.
func Summarize(list []container.Summary) *View {
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
	eachCRI(list, func(e *Entry) {
		v.ContainersListed++
		v.Docker[string(e.Docker.State)]++
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
	})
	return v
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
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		code = "DeadlineExceeded"
	case errors.Is(err, context.Canceled):
		code = "Canceled"
	case errors.As(err, &na):
		code = na.Code()
	case client.IsErrConnectionFailed(err):
		code = "Unavailable"
	}
	return &codedError{err: err, code: code}
}
