package cri

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/collector"
)

// The fallback runs only after an unfiltered list failed for size. It still
// keeps nothing but counts; sandbox ids live only until the relist returns.

var containerFilterStates = []runtimeapi.ContainerState{
	runtimeapi.ContainerState_CONTAINER_CREATED,
	runtimeapi.ContainerState_CONTAINER_RUNNING,
	runtimeapi.ContainerState_CONTAINER_EXITED,
	runtimeapi.ContainerState_CONTAINER_UNKNOWN,
}

func (c *Client) noStreaming() {
	c.mu.Lock()
	c.streaming = "false"
	c.mu.Unlock()
}

// countSandboxes counts sandboxes by state, streamed when the runtime can,
// otherwise one state at a time.
func (c *Client) countSandboxes(ctx context.Context) (map[string]int, []string, bool) {
	counts := map[string]int{collector.SandboxReady: 0, collector.SandboxNotReady: 0}
	var ids []string
	if c.streams() {
		st, err := c.rs.StreamPodSandboxes(ctx, &runtimeapi.StreamPodSandboxesRequest{})
		for err == nil {
			var resp *runtimeapi.StreamPodSandboxesResponse
			if resp, err = st.Recv(); err == nil {
				for _, s := range resp.GetPodSandboxes() {
					counts[sandboxState(s.GetState())]++
					ids = append(ids, s.GetId())
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return counts, ids, true
		}
		if status.Code(err) == codes.Unimplemented {
			c.noStreaming()
		}
		counts = map[string]int{collector.SandboxReady: 0, collector.SandboxNotReady: 0}
		ids = nil
	}
	for _, state := range []runtimeapi.PodSandboxState{runtimeapi.PodSandboxState_SANDBOX_READY, runtimeapi.PodSandboxState_SANDBOX_NOTREADY} {
		sum := listSummary{keepIDs: true}
		if err := c.listSandboxesRaw(ctx, &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: state}}, &sum); err != nil {
			return nil, nil, false
		}
		for k, v := range sum.sandboxCounts() {
			counts[k] += v
		}
		ids = append(ids, sum.IDs...)
	}
	return counts, ids, true
}

// countContainers counts containers by state: streamed when the runtime can,
// else one state at a time, and a state that is still too large one sandbox
// at a time. complete is false when a state could not be counted at all.
func (c *Client) countContainers(ctx context.Context, sandboxIDs []string, tally collector.NamespaceTally) (counts map[string]int, complete, ok bool) {
	counts = map[string]int{}
	for _, s := range collector.ContainerStates {
		counts[s] = 0
	}
	if c.streams() {
		st, err := c.rs.StreamContainers(ctx, &runtimeapi.StreamContainersRequest{Filter: &runtimeapi.ContainerFilter{}})
		for err == nil {
			var resp *runtimeapi.StreamContainersResponse
			if resp, err = st.Recv(); err == nil {
				for _, ct := range resp.GetContainers() {
					counts[containerState(ct.GetState())]++
					if tally != nil {
						tally.Add(ct.GetLabels()[namespaceLabel], containerState(ct.GetState()), int(elementSize(ct)))
					}
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return counts, true, true
		}
		for k := range tally {
			delete(tally, k)
		}
		if status.Code(err) == codes.Unimplemented {
			c.noStreaming()
		}
		for _, s := range collector.ContainerStates {
			counts[s] = 0
		}
	}
	complete = true
	for _, state := range containerFilterStates {
		if state == runtimeapi.ContainerState_CONTAINER_UNKNOWN && c.rejectsUnknownFilter() {
			complete = false
			continue
		}
		filter := &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: state}}
		n, err := c.countFiltered(ctx, filter, tally)
		if tooLarge(err) && sandboxIDs == nil {
			// The unfiltered sandbox list worked; list the ids once now.
			sum := listSummary{keepIDs: true}
			if err := c.listSandboxesRaw(ctx, nil, &sum); err != nil {
				return nil, false, false
			}
			sandboxIDs = sum.IDs
		}
		if tooLarge(err) {
			n, err = 0, nil
			for _, id := range sandboxIDs {
				var m int
				m, err = c.countFiltered(ctx, &runtimeapi.ContainerFilter{
					State:        &runtimeapi.ContainerStateValue{State: state},
					PodSandboxId: id,
				}, tally)
				if err != nil {
					break
				}
				n += m
			}
		}
		if err != nil {
			if state == runtimeapi.ContainerState_CONTAINER_UNKNOWN && rejected(err) {
				c.mu.Lock()
				c.unknownFilterRejected = true
				c.mu.Unlock()
				complete = false
				continue
			}
			return nil, false, false
		}
		counts[containerState(state)] = n
	}
	return counts, complete, true
}

func (c *Client) countFiltered(ctx context.Context, f *runtimeapi.ContainerFilter, tally collector.NamespaceTally) (int, error) {
	var sum listSummary
	if tally != nil {
		sum.namespaces = true
		sum.onItem = func(it item) {
			tally.Add(string(it.Namespace), containerState(runtimeapi.ContainerState(it.State)), it.Bytes)
		}
	}
	if err := c.listContainersRaw(ctx, f, &sum); err != nil {
		return 0, err
	}
	return sum.Items, nil
}

func (c *Client) rejectsUnknownFilter() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.unknownFilterRejected
}

// rejected tells a runtime that refuses the request from one that is down.
func rejected(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.Unknown, codes.Unimplemented, codes.Internal:
		return true
	}
	return false
}

func elementSize(m proto.Message) int64 {
	n := proto.Size(m)
	return int64(protowire.SizeTag(1) + protowire.SizeBytes(n))
}
