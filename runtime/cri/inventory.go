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
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// Inventory lists every sandbox and container with its identity, for the
// one-shot diagnose report, through the same lister as the relist (so past
// the 16 MiB limit through the same streamed or filtered lists), then probes
// the status calls of the suspects.
func (c *Client) Inventory(ctx context.Context) (*kubecontainer.Inventory, error) {
	info, err := c.Info(ctx)
	if err != nil {
		return nil, err
	}
	inv := &kubecontainer.Inventory{Info: info, View: kubecontainer.ViewCRI, Payload: map[string]int64{}}
	v := &Visitor{
		ContainerFields: FieldID | FieldCreated | FieldNamespace | FieldIdentity,
		SandboxFields:   FieldID | FieldCreated | FieldNamespace | FieldIdentity,
		Sandbox: func(it *Item) {
			inv.Sandboxes = append(inv.Sandboxes, kubecontainer.Sandbox{
				ID: string(it.ID), Pod: string(it.Pod), Namespace: string(it.Namespace), PodUID: string(it.PodUID), Attempt: it.Attempt,
				State: sandboxState(runtimeapi.PodSandboxState(it.State)), CreatedAt: time.Unix(0, it.CreatedAt), Bytes: int64(it.Bytes),
			})
		},
		Container: func(it *Item) {
			inv.Containers = append(inv.Containers, kubecontainer.Container{
				ID: string(it.ID), Name: string(it.Name), Attempt: it.Attempt, Pod: string(it.Pod), Namespace: string(it.Namespace),
				PodUID: string(it.PodUID), SandboxID: string(it.SandboxID),
				State: containerState(runtimeapi.ContainerState(it.State)), CreatedAt: time.Unix(0, it.CreatedAt), Bytes: int64(it.Bytes),
			})
		},
		ResetSandboxes:  func() { inv.Sandboxes = inv.Sandboxes[:0] },
		ResetContainers: func() { inv.Containers = inv.Containers[:0] },
	}
	l := c.List(ctx, v)
	if !l.Complete() {
		return nil, l.Error()
	}
	for rpc, s := range l.RPCs {
		if s.PayloadKnown {
			inv.Payload[rpc] = s.PayloadBytes
		}
	}
	inv.Fallback, inv.ListErr = l.Fallback, l.TooLargeErr()
	if l.ContainersIncomplete {
		inv.Incomplete = "unknown containers (the runtime rejects the state filter)"
	}

	var cands []candidate
	for _, s := range inv.Sandboxes {
		if s.State != kubecontainer.SandboxReady {
			cands = append(cands, candidate{kind: kubecontainer.ProbeSandbox, id: s.ID, created: s.CreatedAt.UnixNano()})
		}
	}
	for _, ct := range inv.Containers {
		if ct.State == kubecontainer.ContainerUnknown {
			cands = append(cands, candidate{kind: kubecontainer.ProbeContainer, id: ct.ID, created: ct.CreatedAt.UnixNano()})
		}
	}
	c.mu.Lock()
	c.candidates, c.probeCursor = cands, candidate{}
	c.mu.Unlock()
	inv.Probes = c.Probe(ctx)
	return inv, nil
}
