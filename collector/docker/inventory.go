package docker

import (
	"context"
	"errors"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/pleg-exporter/pleg_exporter/collector"
	"github.com/pleg-exporter/pleg_exporter/collector/diagnose"
)

// Inventory lists every container for the diagnose report: the CRI view
// cri-dockerd would give the kubelet, with Docker's own state beside it, and
// times an inspect of each dead, removing or restarting container (what
// hangs in the field), at most probeMax, each within probeTimeout.
func (c *Client) Inventory(ctx context.Context, probeMax int, probeTimeout time.Duration) (*diagnose.Inventory, error) {
	info, err := c.Info(ctx)
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	list, err := c.api.ContainerList(lctx, container.ListOptions{All: true})
	cancel()
	if err != nil {
		return nil, classify(err)
	}
	inv := &diagnose.Inventory{Info: info, Kind: "docker", Payload: map[string]int64{}}
	inv.Payload[collector.RPCListContainers], inv.Payload[collector.RPCListPodSandbox] = 0, 0
	var suspects []container.Summary
	for i := range list {
		d := &list[i]
		switch KindOf(d) {
		case KindSandbox:
			m, err := ToCRISandbox(d)
			if err != nil {
				continue
			}
			b := elementSize(m)
			inv.Payload[collector.RPCListPodSandbox] += b
			inv.Sandboxes = append(inv.Sandboxes, diagnose.Sandbox{ID: d.ID, Pod: m.Metadata.Name, Namespace: m.Metadata.Namespace,
				State: collector.SandboxStateName(m.State), CreatedAt: time.Unix(d.Created, 0), Bytes: b})
		default:
			ct := diagnose.Container{ID: d.ID, DockerState: string(d.State), CreatedAt: time.Unix(d.Created, 0)}
			if len(d.Names) > 0 {
				ct.Name = d.Names[0]
			}
			if KindOf(d) == KindContainer {
				m, err := ToCRIContainer(d)
				if err == nil {
					ct.Bytes = elementSize(m)
					inv.Payload[collector.RPCListContainers] += ct.Bytes
					ct.Name, ct.State = m.Metadata.Name, collector.ContainerStateName(m.State)
					ct.Pod, ct.Namespace = d.Labels["io.kubernetes.pod.name"], d.Labels["io.kubernetes.pod.namespace"]
				}
			}
			if ct.State == "" {
				// Not the kubelet's: Docker state only, outside the CRI counts.
				ct.State = "docker-only"
			}
			inv.Containers = append(inv.Containers, ct)
		}
		switch d.State {
		case "dead", "removing", "restarting":
			suspects = append(suspects, *d)
		}
	}
	for i, d := range suspects {
		if i == probeMax {
			break
		}
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		t0 := time.Now()
		_, err := c.api.ContainerInspect(pctx, d.ID)
		cancel()
		inv.Probes = append(inv.Probes, collector.ProbeResult{Kind: collector.ProbeContainer, ID: d.ID, Duration: time.Since(t0),
			Err: err, TimedOut: errors.Is(err, context.DeadlineExceeded)})
	}
	return inv, nil
}
