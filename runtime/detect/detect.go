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

// Package detect picks and opens the runtime a node's kubelet relists
// through: the configured endpoint, or the first of the usual sockets, and on
// a cri-dockerd node the Docker daemon beside it.
package detect

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path"
	"sync"
	"time"

	"github.com/pleg-exporter/pleg_exporter/runtime/cri"
	"github.com/pleg-exporter/pleg_exporter/runtime/docker"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// Kinds accepted by --runtime.
const (
	KindAuto   = "auto"
	KindCRI    = "cri"
	KindDocker = "docker"
)

// Candidate is a well-known runtime socket.
type Candidate struct {
	Name     string
	Kind     string
	Endpoint string
}

// DefaultCandidates are probed in order by --runtime=auto. CRI sockets come
// first: on a cri-dockerd node the CRI socket is what the kubelet uses.
var DefaultCandidates = []Candidate{
	{"containerd", KindCRI, "unix:///run/containerd/containerd.sock"},
	{"cri-o", KindCRI, "unix:///var/run/crio/crio.sock"},
	{"cri-dockerd", KindCRI, "unix:///var/run/cri-dockerd.sock"},
	{"docker", KindDocker, "unix:///var/run/docker.sock"},
}

// DefaultDockerHost is where the Docker view is looked for on cri-dockerd nodes.
const DefaultDockerHost = "unix:///var/run/docker.sock"

// Config selects and configures the runtime.
type Config struct {
	Kind       string // auto, cri or docker
	Endpoint   string // empty: probe DefaultCandidates
	DockerHost string // empty: auto-detect on cri-dockerd nodes; "none" disables
	// Candidates overrides DefaultCandidates (tests).
	Candidates   []Candidate
	MaxRecvBytes int
	Timeout      time.Duration
	Logger       *slog.Logger
	// NamespacesTop > 0 adds the per-namespace breakdown (CRI runtimes).
	NamespacesTop int
	// ProbeMax > 0 turns on status probes of at most that many suspects per
	// cycle, each with ProbeTimeout (CRI runtimes).
	ProbeMax     int
	ProbeTimeout time.Duration
	// LimitBytes is the kubelet's receive limit (--pleg.grpc-limit-bytes).
	LimitBytes int64
}

// Validate checks the configuration without touching any socket.
func (c Config) Validate() error {
	switch c.Kind {
	case KindAuto, KindCRI, KindDocker:
	default:
		return fmt.Errorf("--runtime=%q: must be auto, cri or docker", c.Kind)
	}
	if c.Kind != KindAuto && c.Endpoint == "" {
		return fmt.Errorf("--runtime=%s needs --runtime.endpoint", c.Kind)
	}
	if c.Endpoint != "" {
		if _, err := cri.SocketPath(c.Endpoint); err != nil {
			return err
		}
	}
	if c.DockerHost != "" && c.DockerHost != "none" {
		if _, err := cri.SocketPath(c.DockerHost); err != nil {
			return fmt.Errorf("--docker.host: %w", err)
		}
	}
	if c.MaxRecvBytes <= 0 {
		return fmt.Errorf("--runtime.max-recv-bytes must be positive")
	}
	if c.Timeout <= 0 {
		return fmt.Errorf("--relist.timeout must be positive")
	}
	return nil
}

// Open returns the runtime to relist through. With --runtime=auto and no
// endpoint it probes the usual sockets on every relist until one appears, so
// the exporter can start before the runtime does.
func Open(cfg Config) (kubecontainer.Runtime, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Candidates == nil {
		cfg.Candidates = DefaultCandidates
	}
	if cfg.Endpoint != "" {
		c, err := cfg.candidate() // the configured endpoint: no socket is looked for
		if err != nil {
			return nil, err
		}
		return open(cfg, c)
	}
	return &detecting{cfg: cfg}, nil
}

// endpointKind guesses the API of an endpoint given without --runtime:
// Docker's socket speaks the Docker API, every other one the CRI.
func endpointKind(endpoint string) string {
	if p, _ := cri.SocketPath(endpoint); path.Base(p) == "docker.sock" {
		return KindDocker
	}
	return KindCRI
}

func open(cfg Config, c Candidate) (kubecontainer.Runtime, error) {
	if c.Kind == KindDocker {
		return docker.New(cfg.docker(c.Endpoint))
	}
	rt, err := cri.New(cri.Config{Endpoint: c.Endpoint, MaxRecvBytes: cfg.MaxRecvBytes, Timeout: cfg.Timeout,
		NamespacesTop: cfg.NamespacesTop, ProbeMax: cfg.ProbeMax, ProbeTimeout: cfg.ProbeTimeout,
		KubeletLimitBytes: int(cfg.LimitBytes)})
	if err != nil {
		return nil, err
	}
	host := cfg.dockerHost(c)
	if host == "" {
		return rt, nil
	}
	d, err := docker.New(cfg.docker(host))
	if err != nil {
		rt.Close()
		return nil, err
	}
	cfg.Logger.Info("also reading the Docker view, the only one that shows dead containers", "docker_host", host)
	return &withDocker{Runtime: rt, docker: d}, nil
}

// dockerHost is the Docker daemon whose view is added to a CRI runtime's:
// --docker.host, or on a detected cri-dockerd node the usual socket; ""
// for none.
func (cfg Config) dockerHost(c Candidate) string {
	switch host := cfg.DockerHost; {
	case host == "none":
		return ""
	case host == "" && c.Name == "cri-dockerd" && socketExists(DefaultDockerHost):
		return DefaultDockerHost
	default:
		return host
	}
}

func (cfg Config) docker(host string) docker.Config {
	return docker.Config{Host: host, Timeout: cfg.Timeout, MaxBytes: int64(cfg.MaxRecvBytes), Logger: cfg.Logger, ProbeMax: cfg.ProbeMax, ProbeTimeout: cfg.ProbeTimeout}
}

func socketExists(endpoint string) bool {
	p, err := cri.SocketPath(endpoint)
	if err != nil {
		return false
	}
	fi, err := os.Stat(p)
	return err == nil && fi.Mode()&os.ModeSocket != 0
}

// detecting waits for one of the candidate sockets to appear.
type detecting struct {
	cfg    Config
	mu     sync.Mutex
	rt     kubecontainer.Runtime
	warned bool
}

func (d *detecting) resolve() (kubecontainer.Runtime, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.rt != nil {
		return d.rt, nil
	}
	for _, c := range d.cfg.Candidates {
		if !socketExists(c.Endpoint) {
			continue
		}
		rt, err := open(d.cfg, c)
		if err != nil {
			return nil, err
		}
		d.cfg.Logger.Info("detected container runtime", "runtime", c.Name, "endpoint", c.Endpoint)
		d.rt = rt
		return rt, nil
	}
	err := fmt.Errorf("no container runtime socket found (tried %s); set --runtime.endpoint", endpoints(d.cfg.Candidates))
	if !d.warned {
		d.cfg.Logger.Warn("waiting for a container runtime socket to appear", "err", err)
		d.warned = true
	}
	return nil, &noRuntimeError{err}
}

type noRuntimeError struct{ error }

func (e *noRuntimeError) Unwrap() error { return e.error }
func (e *noRuntimeError) Code() string  { return kubecontainer.CodeUnavailable }

func endpoints(cs []Candidate) string {
	s := ""
	for i, c := range cs {
		if i > 0 {
			s += ", "
		}
		s += c.Endpoint
	}
	return s
}

func (d *detecting) Relist(ctx context.Context) *kubecontainer.Snapshot {
	rt, err := d.resolve()
	if err != nil {
		s := kubecontainer.NewSnapshot(time.Now())
		s.Err = err
		return s
	}
	return rt.Relist(ctx)
}

func (d *detecting) Info(ctx context.Context) (kubecontainer.Info, error) {
	rt, err := d.resolve()
	if err != nil {
		return kubecontainer.Info{}, err
	}
	return rt.Info(ctx)
}

func (d *detecting) Probe(ctx context.Context) []kubecontainer.ProbeResult {
	d.mu.Lock()
	rt := d.rt
	d.mu.Unlock()
	if p, ok := rt.(kubecontainer.Prober); ok {
		return p.Probe(ctx)
	}
	return nil
}

func (d *detecting) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.rt != nil {
		return d.rt.Close()
	}
	return nil
}

// withDocker adds Docker's own view to a relist through cri-dockerd: the
// kubelet sees Dead containers only as unknown.
type withDocker struct {
	kubecontainer.Runtime
	docker *docker.Client
}

func (w *withDocker) Relist(ctx context.Context) *kubecontainer.Snapshot {
	snap := w.Runtime.Relist(ctx)
	// Listed after the CRI calls and outside snap.Duration: the kubelet does
	// not make this call.
	v, err := w.docker.List(ctx)
	if err != nil {
		snap.DockerErr = err
		return snap
	}
	snap.DockerContainers = v.Docker
	if snap.Counted && snap.ContainersIncomplete {
		// cri-dockerd refused the UNKNOWN filter; Docker knows them.
		snap.Containers[kubecontainer.ContainerUnknown] = v.Containers[kubecontainer.ContainerUnknown]
		snap.ContainersIncomplete = false
	}
	return snap
}

func (w *withDocker) Probe(ctx context.Context) []kubecontainer.ProbeResult {
	if p, ok := w.Runtime.(kubecontainer.Prober); ok {
		return p.Probe(ctx)
	}
	return nil
}

func (w *withDocker) Close() error {
	w.docker.Close()
	return w.Runtime.Close()
}

func (d *detecting) Inventory(ctx context.Context) (*kubecontainer.Inventory, error) {
	rt, err := d.resolve()
	if err != nil {
		return nil, err
	}
	return rt.Inventory(ctx)
}

// Inventory lists through cri-dockerd and adds Docker's own state beside the
// CRI one: only Docker shows dead.
func (w *withDocker) Inventory(ctx context.Context) (*kubecontainer.Inventory, error) {
	inv, err := w.Runtime.Inventory(ctx)
	if err != nil {
		return nil, err
	}
	if dinv, err := w.docker.Inventory(ctx); err == nil {
		states := map[string]string{}
		for _, c := range dinv.Containers {
			states[c.ID] = c.DockerState
		}
		for i := range inv.Containers {
			inv.Containers[i].DockerState = states[inv.Containers[i].ID]
		}
		inv.Probes = append(inv.Probes, dinv.Probes...)
	}
	inv.View = kubecontainer.ViewDocker
	return inv, nil
}
