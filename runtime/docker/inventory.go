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
	"errors"
	"time"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// Inventory lists every container for the diagnose report: the CRI view
// cri-dockerd would give the kubelet, with Docker's own state beside it, and
// times an inspect of each dead, removing or restarting container (what
// hangs in the field), at most ProbeMax, each within ProbeTimeout.
func (c *Client) Inventory(ctx context.Context) (*kubecontainer.Inventory, error) {
	info, err := c.Info(ctx)
	if err != nil {
		return nil, err
	}
	inv := &kubecontainer.Inventory{Info: info, View: kubecontainer.ViewDocker, DockerAPI: true, Payload: map[string]int64{
		kubecontainer.RPCListContainers: 0, kubecontainer.RPCListPodSandbox: 0,
	}}
	var suspects []string
	_, err = c.list(ctx, func(e *Entry) {
		d := e.Docker
		created := time.Unix(d.Created, 0)
		if m := e.Sandbox; m != nil {
			inv.Payload[kubecontainer.RPCListPodSandbox] += e.Bytes
			inv.Sandboxes = append(inv.Sandboxes, kubecontainer.Sandbox{ID: d.ID, Pod: m.Metadata.Name, Namespace: m.Metadata.Namespace,
				PodUID: m.Metadata.Uid, Attempt: m.Metadata.Attempt, State: kubecontainer.SandboxStateName(m.State), CreatedAt: created, Bytes: e.Bytes})
		} else if KindOf(d) != KindSandbox {
			// Not the kubelet's (or a name cri-dockerd skips): Docker state
			// only, outside the CRI counts.
			ct := kubecontainer.Container{ID: d.ID, DockerState: d.State, CreatedAt: created, State: kubecontainer.ContainerDockerOnly}
			if len(d.Names) > 0 {
				ct.Name = d.Names[0]
			}
			if m := e.Container; m != nil {
				inv.Payload[kubecontainer.RPCListContainers] += e.Bytes
				ct.Name, ct.State, ct.Bytes = m.Metadata.Name, kubecontainer.ContainerStateName(m.State), e.Bytes
				ct.Pod, ct.Namespace = d.Labels["io.kubernetes.pod.name"], d.Labels["io.kubernetes.pod.namespace"]
				ct.PodUID, ct.SandboxID, ct.Attempt = d.Labels["io.kubernetes.pod.uid"], m.PodSandboxId, m.Metadata.Attempt
			}
			inv.Containers = append(inv.Containers, ct)
		}
		switch d.State {
		case kubecontainer.DockerDead, kubecontainer.DockerRemoving, kubecontainer.DockerRestarting:
			suspects = append(suspects, d.ID)
		}
	})
	if err != nil {
		return nil, err
	}
	for i, id := range suspects {
		if i == c.cfg.ProbeMax {
			break
		}
		pctx, cancel := context.WithTimeout(ctx, c.cfg.ProbeTimeout)
		t0 := time.Now()
		_, err := c.api.ContainerInspect(pctx, id)
		cancel()
		inv.Probes = append(inv.Probes, kubecontainer.ProbeResult{Kind: kubecontainer.ProbeContainer, ID: id, Duration: time.Since(t0),
			Err: err, TimedOut: errors.Is(err, context.DeadlineExceeded)})
	}
	return inv, nil
}
