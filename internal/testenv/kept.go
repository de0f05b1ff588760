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

package testenv

import (
	"context"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Item is a container or sandbox of a pod the kubelet runs: what it is, and
// whether the kubelet's own container GC would have to keep it (a running
// container, a ready sandbox, the newest container of its pod and name).
type Item struct {
	Desc string
	Keep bool
}

// PodItems lists the containers and sandboxes of the pods match selects,
// by id.
func PodItems(ctx context.Context, rs runtimeapi.RuntimeServiceClient, match func(*runtimeapi.PodSandboxMetadata) bool) (map[string]Item, error) {
	m := map[string]Item{}
	sbs, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return nil, err
	}
	newest := map[string]*runtimeapi.Container{} // namespace/pod/container -> newest
	for _, s := range sbs.GetItems() {
		md := s.GetMetadata()
		if !match(md) {
			continue
		}
		m[s.GetId()] = Item{Desc: fmt.Sprintf("sandbox %s/%s %v attempt %d", md.GetNamespace(), md.GetName(), s.GetState(), md.GetAttempt()),
			Keep: s.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY}
		cs, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: s.GetId()}})
		if err != nil {
			return nil, err
		}
		for _, c := range cs.GetContainers() {
			m[c.GetId()] = Item{Desc: fmt.Sprintf("%s/%s/%s %v attempt %d restartCount %s", md.GetNamespace(), md.GetName(), c.GetMetadata().GetName(),
				c.GetState(), c.GetMetadata().GetAttempt(), c.GetAnnotations()["io.kubernetes.container.restartCount"]),
				Keep: c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING}
			k := md.GetNamespace() + "/" + md.GetName() + "/" + c.GetMetadata().GetName()
			if n := newest[k]; n == nil || c.GetCreatedAt() > n.GetCreatedAt() {
				newest[k] = c
			}
		}
	}
	for _, c := range newest {
		it := m[c.GetId()]
		it.Keep = true
		m[c.GetId()] = it
	}
	return m, nil
}

// CompareItems checks a gc against the kubelet's own GC policy: what it
// must keep is there and unchanged, anything else that went was in the
// plan (an old, empty sandbox of a restarted pod, an older attempt), and
// nothing appeared (a pod restarted). It returns how many kept items it
// found, what went, and every breach.
func CompareItems(before, after map[string]Item, planned map[string]bool) (kept int, went, breaches []string) {
	for id, was := range before {
		now, there := after[id]
		switch {
		case was.Keep && now.Desc != was.Desc:
			breaches = append(breaches, fmt.Sprintf("item %.12s: %q before gc, %q after", id, was.Desc, now.Desc))
		case was.Keep:
			kept++
		case !there && !planned[id]:
			breaches = append(breaches, fmt.Sprintf("item %.12s (%s) went without being in the plan", id, was.Desc))
		case !there:
			went = append(went, was.Desc)
		}
	}
	for id, now := range after {
		if _, ok := before[id]; !ok {
			breaches = append(breaches, fmt.Sprintf("item %.12s (%s) appeared during gc: a pod restarted", id, now.Desc))
		}
	}
	return kept, went, breaches
}
