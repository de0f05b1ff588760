package cri

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/collector"
	"github.com/pleg-exporter/pleg_exporter/collector/diagnose"
)

// Inventory lists every sandbox and container with its identity, for the
// one-shot diagnose report. Unlike Relist it decodes the answers, and past
// the 16 MiB limit it goes through the same filtered lists as the fallback.
// It then probes the status calls of the suspects.
func (c *Client) Inventory(ctx context.Context) (*diagnose.Inventory, error) {
	info, err := c.Info(ctx)
	if err != nil {
		return nil, err
	}
	inv := &diagnose.Inventory{Info: info, Kind: "cri", Payload: map[string]int64{}}

	sbs, err := c.allSandboxes(ctx, inv)
	if err != nil {
		return nil, err
	}
	cts, err := c.allContainers(ctx, inv, sbs)
	if err != nil {
		return nil, err
	}
	var cands []candidate
	for _, s := range sbs {
		inv.Sandboxes = append(inv.Sandboxes, diagnose.Sandbox{
			ID: s.GetId(), Pod: s.GetMetadata().GetName(), Namespace: s.GetMetadata().GetNamespace(),
			State: sandboxState(s.GetState()), CreatedAt: time.Unix(0, s.GetCreatedAt()), Bytes: elementSize(s),
		})
		if s.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
			cands = append(cands, candidate{kind: collector.ProbeSandbox, id: s.GetId(), created: s.GetCreatedAt()})
		}
	}
	for _, ct := range cts {
		inv.Containers = append(inv.Containers, diagnose.Container{
			ID: ct.GetId(), Name: ct.GetMetadata().GetName(), Pod: ct.GetLabels()["io.kubernetes.pod.name"],
			Namespace: ct.GetLabels()[namespaceLabel], State: containerState(ct.GetState()),
			CreatedAt: time.Unix(0, ct.GetCreatedAt()), Bytes: elementSize(ct),
		})
		if ct.GetState() == runtimeapi.ContainerState_CONTAINER_UNKNOWN {
			cands = append(cands, candidate{kind: collector.ProbeContainer, id: ct.GetId(), created: ct.GetCreatedAt()})
		}
	}
	c.mu.Lock()
	c.candidates, c.probeCursor = cands, candidate{}
	c.mu.Unlock()
	inv.Probes = c.Probe(ctx)
	return inv, nil
}

func (c *Client) allSandboxes(ctx context.Context, inv *diagnose.Inventory) ([]*runtimeapi.PodSandbox, error) {
	cctx, cancel := c.call(ctx)
	resp, err := c.rs.ListPodSandbox(cctx, &runtimeapi.ListPodSandboxRequest{})
	cancel()
	if err == nil {
		inv.Payload[collector.RPCListPodSandbox] = int64(proto.Size(resp))
		return resp.GetItems(), nil
	}
	if !tooLarge(err) {
		return nil, fmt.Errorf("list pod sandboxes on %s: %w", c.cfg.Endpoint, err)
	}
	c.noteTooLarge(inv, collector.RPCListPodSandbox, err)
	var out []*runtimeapi.PodSandbox
	for _, st := range []runtimeapi.PodSandboxState{runtimeapi.PodSandboxState_SANDBOX_READY, runtimeapi.PodSandboxState_SANDBOX_NOTREADY} {
		cctx, cancel := c.call(ctx)
		resp, err := c.rs.ListPodSandbox(cctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: st}}})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("list %v pod sandboxes on %s: %w", st, c.cfg.Endpoint, err)
		}
		out = append(out, resp.GetItems()...)
	}
	return out, nil
}

func (c *Client) noteTooLarge(inv *diagnose.Inventory, rpc string, err error) {
	inv.Fallback = true
	if inv.ListErr == nil {
		inv.ListErr = err
	}
	if s := rpcStat(0, 0, err); s.PayloadKnown {
		inv.Payload[rpc] = s.PayloadBytes
	}
}

func (c *Client) listContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, int64, error) {
	cctx, cancel := c.call(ctx)
	defer cancel()
	resp, err := c.rs.ListContainers(cctx, &runtimeapi.ListContainersRequest{Filter: f})
	if err != nil {
		return nil, 0, err
	}
	return resp.GetContainers(), int64(proto.Size(resp)), nil
}

func (c *Client) allContainers(ctx context.Context, inv *diagnose.Inventory, sbs []*runtimeapi.PodSandbox) ([]*runtimeapi.Container, error) {
	cts, size, err := c.listContainers(ctx, &runtimeapi.ContainerFilter{})
	if err == nil {
		inv.Payload[collector.RPCListContainers] = size
		return cts, nil
	}
	if !tooLarge(err) {
		return nil, fmt.Errorf("list containers on %s: %w", c.cfg.Endpoint, err)
	}
	c.noteTooLarge(inv, collector.RPCListContainers, err)
	var out []*runtimeapi.Container
	for _, st := range containerFilterStates {
		part, _, err := c.listContainers(ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: st}})
		if tooLarge(err) {
			part, err = nil, nil
			for _, sb := range sbs {
				var p []*runtimeapi.Container
				p, _, err = c.listContainers(ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: st}, PodSandboxId: sb.GetId()})
				if err != nil {
					break
				}
				part = append(part, p...)
			}
		}
		if err != nil {
			if st == runtimeapi.ContainerState_CONTAINER_UNKNOWN && rejected(err) {
				inv.Incomplete = "unknown containers (the runtime rejects the state filter)"
				continue
			}
			return nil, fmt.Errorf("list %v containers on %s: %w", st, c.cfg.Endpoint, err)
		}
		out = append(out, part...)
	}
	return out, nil
}
