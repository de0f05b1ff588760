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
// that are not running).
func (r *Remover) RemoveContainer(ctx context.Context, id string) error {
	_, err := r.rs.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id})
	return r.removal("container", id, err)
}

// RemoveSandbox removes one pod sandbox. The gc plans only sandboxes that
// are not ready, so unlike the kubelet's GC it makes no StopPodSandbox call
// first: that call is not on its allow-list.
func (r *Remover) RemoveSandbox(ctx context.Context, id string) error {
	_, err := r.rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
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
