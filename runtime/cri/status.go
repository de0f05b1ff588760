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
	"errors"
	"fmt"
	"sort"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// errStatusNil is the kubelet's answer to a status call that returned no
// status (kuberuntime: "pod sandbox status is nil", ErrContainerStatusNil):
// the pod's inspection fails.
var errStatusNil = status.Error(codes.Internal, "runtime answered without a status")

// InspectPod implements kubecontainer.PodInspector: the kubelet's
// GetPodStatus of one pod, call after call, each with the client's deadline
// (--relist.timeout, the kubelet's --runtime-request-timeout).
//
// The pod's sandboxes and containers are learnt with the two lists filtered
// by its uid label that kubelets before 1.37 make in GetPodStatus
// (getSandboxIDByPodUID, getPodContainerStatuses). Kubelet 1.37 takes them
// from its relist instead (kubernetes PR 137471) and makes only the status
// calls; the exporter keeps no id between relists, so it asks. The two lists
// are answered from the runtime's memory, and their items are read off the
// wire like the relist's. The status calls, where a broken sandbox hangs,
// are the same for every version.
func (c *Client) InspectPod(ctx context.Context, uid string, track kubecontainer.CallTracker) (in kubecontainer.PodInspection) {
	in = kubecontainer.PodInspection{UID: uid, Start: time.Now()}
	defer func() { in.Duration = time.Since(in.Start) }()
	sel := map[string]string{podUIDLabel: uid}

	type sandbox struct {
		id      string
		created int64
	}
	var sandboxes []sandbox
	sb := &listSummary{sandboxes: true, fields: FieldID | FieldCreated | FieldIdentity | FieldNamespace}
	sb.onItem = func(it *Item) {
		sandboxes = append(sandboxes, sandbox{id: string(it.ID), created: it.CreatedAt})
		if in.Name == "" {
			in.Name, in.Namespace = string(it.Pod), string(it.Namespace)
		}
	}
	if !c.statusCall(ctx, &in, track, kubecontainer.RPCListPodSandbox, "", func(cctx context.Context) error {
		return c.invoke(cctx, listSandboxes, &runtimeapi.PodSandboxFilter{LabelSelector: sel}, sb)
	}) {
		return in
	}
	// Newest first, as the kubelet inspects them.
	sort.SliceStable(sandboxes, func(i, j int) bool { return sandboxes[i].created > sandboxes[j].created })
	for _, s := range sandboxes {
		in.Sandboxes = append(in.Sandboxes, s.id)
		if !c.statusCall(ctx, &in, track, kubecontainer.RPCPodSandboxStatus, s.id, func(cctx context.Context) error {
			resp, err := c.rs.PodSandboxStatus(cctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: s.id})
			if err == nil && resp.GetStatus() == nil {
				err = errStatusNil
			}
			return err
		}) {
			return in
		}
	}

	ct := &listSummary{fields: FieldID | FieldIdentity | FieldNamespace}
	ct.onItem = func(it *Item) {
		in.Containers = append(in.Containers, string(it.ID))
		if in.Name == "" {
			in.Name, in.Namespace = string(it.Pod), string(it.Namespace)
		}
	}
	if !c.statusCall(ctx, &in, track, kubecontainer.RPCListContainers, "", func(cctx context.Context) error {
		return c.invoke(cctx, listContainers, &runtimeapi.ContainerFilter{LabelSelector: sel}, ct)
	}) {
		return in
	}
	for _, id := range in.Containers {
		if !c.statusCall(ctx, &in, track, kubecontainer.RPCContainerStatus, id, func(cctx context.Context) error {
			resp, err := c.rs.ContainerStatus(cctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
			if err == nil && resp.GetStatus() == nil {
				err = errStatusNil
			}
			return err
		}) {
			return in
		}
	}
	return in
}

// statusCall makes one call of an inspection on its own deadline and
// records it. It returns false when the inspection must stop: the call
// failed with anything but NotFound (an item that went between the list and
// the call, which the kubelet skips).
func (c *Client) statusCall(ctx context.Context, in *kubecontainer.PodInspection, track kubecontainer.CallTracker,
	rpc, id string, call func(context.Context) error) bool {
	if track.Begin != nil {
		track.Begin(rpc, id)
	}
	sc := kubecontainer.StatusCall{RPC: rpc, ID: id, Start: time.Now()}
	cctx, cancel := c.call(ctx)
	err := call(cctx)
	cancel()
	sc.Duration = time.Since(sc.Start)
	if err != nil {
		sc.Err = statusErr(rpc, id, c.cfg.Endpoint, err)
	}
	in.Calls = append(in.Calls, sc)
	if track.End != nil {
		track.End(sc)
	}
	if err == nil || status.Code(err) == codes.NotFound {
		return true
	}
	in.Err, in.Failed = sc.Err, sc
	return false
}

// statusErr gives a status call's error its context, keeping the gRPC code
// for kubecontainer.ErrorCode.
func statusErr(rpc, id, endpoint string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		err = status.FromContextError(err).Err()
	}
	if id == "" {
		return fmt.Errorf("%s of the pod on %s: %w", rpc, endpoint, err)
	}
	return fmt.Errorf("%s of %s on %s: %w", rpc, id, endpoint, err)
}
