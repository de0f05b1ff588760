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

package detect

import (
	"context"
	"fmt"

	"github.com/pleg-exporter/pleg_exporter/runtime/cri"
	"github.com/pleg-exporter/pleg_exporter/runtime/docker"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// OpenGC opens the runtime for `pleg_exporter gc`: the same choice of
// endpoint as Open, but now (gc does not wait for a socket to appear), and
// through the clients that may also remove containers and sandboxes. The
// daemon never calls it.
func OpenGC(cfg Config) (kubecontainer.GCRuntime, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Candidates == nil {
		cfg.Candidates = DefaultCandidates
	}
	// gc reads the inventory for its plan only: no status probes of the
	// suspects (up to --probe.max-per-cycle × --probe.timeout on a node
	// whose sandboxes hang); each removal asks its own item's state.
	cfg.ProbeMax = 0
	c, err := cfg.candidate()
	if err != nil {
		return nil, err
	}
	if c.Kind == KindDocker {
		return docker.NewRemover(cfg.docker(c.Endpoint))
	}
	r, err := cri.NewRemover(cri.Config{Endpoint: c.Endpoint, MaxRecvBytes: cfg.MaxRecvBytes, Timeout: cfg.Timeout})
	if err != nil {
		return nil, err
	}
	host := cfg.dockerHost(c)
	if host == "" && cfg.DockerHost == "" && socketExists(DefaultDockerHost) {
		// An endpoint given by hand may be cri-dockerd's too: it says
		// so as the runtime's name. Without Docker's view a container
		// Docker restarts looks unknown, like a dead one.
		ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
		if info, err := r.Info(ctx); err == nil && info.Runtime == "docker" {
			host = DefaultDockerHost
		}
		cancel()
	}
	if host == "" {
		return r, nil
	}
	// cri-dockerd: listed and removed through the CRI, as the kubelet
	// does; Docker's own view adds the state only it shows (dead).
	d, err := docker.New(cfg.docker(host))
	if err != nil {
		r.Close()
		return nil, err
	}
	return gcWithDocker{withDocker: &withDocker{Runtime: r, docker: d}, Remover: r}, nil
}

type gcWithDocker struct {
	*withDocker
	kubecontainer.Remover
}

// candidate is the endpoint the configuration names, or the first of the
// usual sockets that exists now.
func (cfg Config) candidate() (Candidate, error) {
	if cfg.Endpoint != "" {
		kind := cfg.Kind
		if kind == KindAuto {
			kind = endpointKind(cfg.Endpoint)
		}
		return Candidate{Name: cfg.Endpoint, Kind: kind, Endpoint: cfg.Endpoint}, nil
	}
	for _, c := range cfg.Candidates {
		if socketExists(c.Endpoint) {
			return c, nil
		}
	}
	return Candidate{}, &noRuntimeError{fmt.Errorf("no container runtime socket found (tried %s); set --runtime.endpoint", endpoints(cfg.Candidates))}
}
