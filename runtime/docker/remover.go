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

package docker

import (
	"context"
	"fmt"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/errdefs"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// Remover is the gc command's Docker client: the reads of Client plus the
// removal of one container by id (a container or a pod sandbox's pause
// container), and nothing else: its guards refuse every other write, and
// force, so a container that turns out to be running is refused by the
// daemon, never killed.
type Remover struct {
	*Client
	rm func(ctx context.Context, id string, opts container.RemoveOptions) error
}

// NewRemover prepares the gc command's client; it does not connect.
func NewRemover(cfg Config) (*Remover, error) {
	c, api, err := newClient(cfg, gcPolicy)
	if err != nil {
		return nil, err
	}
	return &Remover{Client: c, rm: api.ContainerRemove}, nil
}

// RemoveContainer removes a container and its anonymous volumes, as
// cri-dockerd's RemoveContainer does (it forces; this never does, and asks
// Docker first: a container that runs, is paused or restarting now is left
// alone).
func (r *Remover) RemoveContainer(ctx context.Context, id string) error {
	info, err := r.api.ContainerInspect(ctx, id)
	switch {
	case errdefs.IsNotFound(err):
		return fmt.Errorf("remove container %s: %w (%v)", id, kubecontainer.ErrGone, err)
	case err == nil && info.State != nil && (info.State.Running || info.State.Paused || info.State.Restarting):
		return fmt.Errorf("container %s: %w (Docker says %s)", id, kubecontainer.ErrChanged, info.State.Status)
	case err != nil && ctx.Err() != nil:
		return classify(fmt.Errorf("inspect container %s on docker at %s: %w", id, r.cfg.Host, err))
	}
	err = r.rm(ctx, id, container.RemoveOptions{RemoveVolumes: true})
	switch {
	case err == nil:
		return nil
	case errdefs.IsNotFound(err):
		return fmt.Errorf("remove container %s: %w (%v)", id, kubecontainer.ErrGone, err)
	}
	return classify(fmt.Errorf("remove container %s on docker at %s: %w", id, r.cfg.Host, err))
}

// RemoveSandbox refuses: through the Docker API a sandbox's container can
// go but cri-dockerd's checkpoint of it stays, and cri-dockerd keeps
// listing the sandbox. The plan keeps them (Inventory.DockerAPI): the
// kubelet removes them through cri-dockerd once its own GC runs again.
func (r *Remover) RemoveSandbox(_ context.Context, id string) error {
	return fmt.Errorf("pod sandbox %s: the Docker API cannot remove cri-dockerd's checkpoint of a sandbox; left to the kubelet", id)
}
