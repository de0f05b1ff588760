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
// cri-dockerd's RemoveContainer does (it forces; this never does).
func (r *Remover) RemoveContainer(ctx context.Context, id string) error {
	return r.remove(ctx, "container", id)
}

// RemoveSandbox removes a pod sandbox's container; the gc removes the
// sandbox's containers first.
func (r *Remover) RemoveSandbox(ctx context.Context, id string) error {
	return r.remove(ctx, "pod sandbox", id)
}

func (r *Remover) remove(ctx context.Context, what, id string) error {
	err := r.rm(ctx, id, container.RemoveOptions{RemoveVolumes: true})
	switch {
	case err == nil:
		return nil
	case errdefs.IsNotFound(err):
		return fmt.Errorf("remove %s %s: %w (%v)", what, id, kubecontainer.ErrGone, err)
	}
	return classify(fmt.Errorf("remove %s %s on docker at %s: %w", what, id, r.cfg.Host, err))
}
