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

package cri

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// Remover is the gc command's client: the lister and status calls of
// Client, plus RemoveContainer and RemovePodSandbox, on a connection of its
// own whose allow-list has exactly those two calls more than the daemon's.
// The daemon builds its clients with New, which cannot remove.
type Remover struct {
	*Client
}

// NewRemover prepares the gc command's client; like New it does not
// connect.
func NewRemover(cfg Config) (*Remover, error) {
	c, err := newClient(cfg, gcRemover)
	if err != nil {
		return nil, err
	}
	return &Remover{Client: c}, nil
}

// RemoveContainer removes one container, as the kubelet's container GC does
// (it makes no StopContainer call first: the GC removes only containers
// that are not running). The runtime would stop a running one to remove it,
// so its state is asked first: running now, it is left alone.
func (r *Remover) RemoveContainer(ctx context.Context, id string) error {
	st, err := r.rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	switch {
	case status.Code(err) == codes.NotFound:
		return r.removal("container", id, err)
	case err == nil && st.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING:
		return fmt.Errorf("container %s: %w (it runs now)", id, kubecontainer.ErrChanged)
	case err != nil && ctx.Err() != nil:
		return fmt.Errorf("status of container %s on %s: %w", id, r.cfg.Endpoint, err)
	}
	// Any other status error (a broken container) does not stop the
	// removal: the kubelet's GC would make it too.
	_, err = r.rs.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id})
	return r.removal("container", id, err)
}

// RemoveSandbox removes one pod sandbox. The gc plans only sandboxes that
// are not ready and hold no container; RemovePodSandbox would stop a ready
// one and remove every container in it, so both are asked first (a
// container gc never listed, or one created since, keeps its sandbox).
// Unlike the kubelet's GC it makes no StopPodSandbox call: that call is not
// on its allow-list.
func (r *Remover) RemoveSandbox(ctx context.Context, id string) error {
	st, err := r.rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	switch {
	case status.Code(err) == codes.NotFound:
		return r.removal("pod sandbox", id, err)
	case err == nil && st.GetStatus().GetState() == runtimeapi.PodSandboxState_SANDBOX_READY:
		return fmt.Errorf("pod sandbox %s: %w (it is ready now)", id, kubecontainer.ErrChanged)
	case err != nil && ctx.Err() != nil:
		return fmt.Errorf("status of pod sandbox %s on %s: %w", id, r.cfg.Endpoint, err)
	}
	cs, err := r.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: id}})
	switch {
	case err != nil:
		return fmt.Errorf("list the containers of pod sandbox %s on %s: %w", id, r.cfg.Endpoint, err)
	case len(cs.GetContainers()) > 0:
		return fmt.Errorf("pod sandbox %s: %w (it holds %d containers)", id, kubecontainer.ErrChanged, len(cs.GetContainers()))
	}
	_, err = r.rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
	return r.removal("pod sandbox", id, err)
}

// removal names the call in its error; NotFound means the item went before
// we came (the kubelet removed it), which is done, not failed. containerd
// itself answers success for an id it does not know.
func (r *Remover) removal(what, id string, err error) error {
	switch {
	case err == nil:
		return nil
	case status.Code(err) == codes.NotFound:
		return fmt.Errorf("remove %s %s: %w (%s)", what, id, kubecontainer.ErrGone, status.Convert(err).Message())
	}
	return fmt.Errorf("remove %s %s on %s: %w", what, id, r.cfg.Endpoint, err)
}
