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
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// The one lister. Everything that reads the whole node goes through List:
// the relist (counts and bytes), the diagnose inventory (items with their
// identities), and it is what a report of what the kubelet's container GC
// would remove must read the node through. It makes
// the kubelet's two unfiltered calls and, when an answer is too large to
// send, lists the same items anyway through calls whose answers fit:
//
//  1. streamed (StreamPodSandboxes / StreamContainers, CRI list streaming)
//     when the runtime implements it;
//  2. otherwise, or when the stream fails, one state at a time;
//  3. a container state still too large, one sandbox at a time.
//
// cri-dockerd rejects the UNKNOWN state filter (it becomes Docker's invalid
// status=unknown); that is remembered and the state left out, which the
// Listing says.

// Visitor receives every item List reads. Items of a streamed list that
// breaks half way have already been visited when the lister lists them again
// another way: the Reset functions are called first, to forget them.
type Visitor struct {
	// ContainerFields and SandboxFields are what the scanner reads of each
	// item besides its state and size.
	ContainerFields Fields
	SandboxFields   Fields
	Sandbox         func(*Item)
	Container       func(*Item)
	ResetSandboxes  func()
	ResetContainers func()
}

// Listing is what one List did.
type Listing struct {
	// Start and Duration cover the two unfiltered calls, the part the
	// kubelet repeats every second; RPCs has each of them.
	Start    time.Time
	Duration time.Duration
	RPCs     map[string]kubecontainer.RPCStat
	// Err is what the kubelet's relist would have failed with: the first
	// unfiltered call that failed, with the endpoint. nil when both
	// returned (their size against the kubelet's limit is the caller's to
	// judge: the runtime may send more than the kubelet accepts).
	Err error
	// containersErr is the container list's own error, when the sandboxes
	// were listed but the containers not.
	containersErr error

	// Fallback is true when an answer was too large and the items were
	// listed through streamed or filtered calls; FallbackErr is why that
	// failed, if it did.
	Fallback         bool
	FallbackDuration time.Duration
	FallbackErr      error
	// ContainersIncomplete is set when unknown containers could not be
	// listed (the runtime rejects the state filter).
	ContainersIncomplete bool

	// Whether every sandbox / every container was visited, and their
	// counts by state (enum order) when so.
	SandboxesListed, ContainersListed bool
	sandboxStates, containerStates    [4]int
}

// Complete is true when every sandbox and every container was listed.
func (l *Listing) Complete() bool { return l.SandboxesListed && l.ContainersListed }

// Error is why the listing is not complete: the fallback's error, else the
// call that failed for another reason than size.
func (l *Listing) Error() error {
	switch {
	case l.FallbackErr != nil:
		return l.FallbackErr
	case l.SandboxesListed && !l.ContainersListed && l.containersErr != nil:
		return l.containersErr
	}
	return l.Err
}

// TooLargeErr is the first unfiltered call the runtime refused for size.
func (l *Listing) TooLargeErr() error {
	for _, rpc := range []string{kubecontainer.RPCListPodSandbox, kubecontainer.RPCListContainers} {
		if err := l.RPCs[rpc].Err; tooLarge(err) {
			return err
		}
	}
	return nil
}

// SandboxCounts returns the sandboxes by state name.
func (l *Listing) SandboxCounts() map[string]int {
	return map[string]int{
		kubecontainer.SandboxReady:    l.sandboxStates[0],
		kubecontainer.SandboxNotReady: l.sandboxStates[1] + l.sandboxStates[2] + l.sandboxStates[3],
	}
}

// ContainerCounts returns the containers by the kubelet's state names.
func (l *Listing) ContainerCounts() map[string]int {
	m := map[string]int{}
	for st, n := range l.containerStates {
		m[kubecontainer.ContainerStateName(runtimeapi.ContainerState(st))] += n
	}
	return m
}

// stateIndex maps an enum value into the counts: unknown values count as
// the last state (UNKNOWN; for sandboxes, notready).
func stateIndex(s int32) int {
	if s >= 0 && s < 3 {
		return int(s)
	}
	return 3
}

var (
	sandboxFilterStates = []runtimeapi.PodSandboxState{
		runtimeapi.PodSandboxState_SANDBOX_READY,
		runtimeapi.PodSandboxState_SANDBOX_NOTREADY,
	}
	containerFilterStates = []runtimeapi.ContainerState{
		runtimeapi.ContainerState_CONTAINER_CREATED,
		runtimeapi.ContainerState_CONTAINER_RUNNING,
		runtimeapi.ContainerState_CONTAINER_EXITED,
		runtimeapi.ContainerState_CONTAINER_UNKNOWN,
	}
)

// List makes the kubelet's relist calls, ListPodSandbox with a nil filter
// then ListContainers with an empty one, each with its own deadline, and
// lists through the fallback whatever was too large to send. Like the
// kubelet it stops at a sandbox list that failed for another reason than
// size.
func (c *Client) List(ctx context.Context, v *Visitor) *Listing {
	l := &Listing{Start: time.Now(), RPCs: map[string]kubecontainer.RPCStat{}}
	sb := c.summary(listSandboxes, v.SandboxFields, l, v)
	cctx, cancel := c.call(ctx)
	sbErr := c.invoke(cctx, listSandboxes, nil, sb)
	cancel()
	t1 := time.Now()
	l.RPCs[kubecontainer.RPCListPodSandbox] = rpcStat(t1.Sub(l.Start), int64(sb.Size), sbErr)

	// The kubelet stops at a failed sandbox list; we go on when it failed
	// only for size, because the container list is measured independently.
	ctErr := sbErr
	if sbErr == nil || tooLarge(sbErr) {
		ct := c.summary(listContainers, v.ContainerFields, l, v)
		cctx, cancel := c.call(ctx)
		ctErr = c.invoke(cctx, listContainers, &runtimeapi.ContainerFilter{}, ct)
		cancel()
		l.RPCs[kubecontainer.RPCListContainers] = rpcStat(time.Since(t1), int64(ct.Size), ctErr)
	}
	l.Duration = time.Since(l.Start)
	switch {
	case sbErr != nil:
		l.Err = fmt.Errorf("list pod sandboxes on %s: %w", c.cfg.Endpoint, sbErr)
	case ctErr != nil:
		l.Err = fmt.Errorf("list containers on %s: %w", c.cfg.Endpoint, ctErr)
	}
	if ctErr != nil && !tooLarge(ctErr) {
		l.containersErr = fmt.Errorf("list containers on %s: %w", c.cfg.Endpoint, ctErr)
	}
	l.SandboxesListed, l.ContainersListed = sbErr == nil, ctErr == nil
	needSB, needCT := tooLarge(sbErr), tooLarge(ctErr)
	if c.streams() {
		// What a streaming kubelet would receive at once: no message of a
		// stream holds more than the whole answer, so an answer within the
		// kubelet's limit is its own bound; one past it (sent because the
		// runtime's send limit is higher) is streamed once to measure.
		c.streamBound(ctx, listSandboxes, nil, kubecontainer.RPCListPodSandbox, sbErr, l)
		c.streamBound(ctx, listContainers, &runtimeapi.ContainerFilter{}, kubecontainer.RPCListContainers, ctErr, l)
	}
	if !needSB && !needCT {
		return l
	}

	// Fallback: the kubelet is blind now, we must not be.
	fbStart := time.Now()
	fctx, fcancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer fcancel()
	l.Fallback = true
	var sandboxIDs []string // from the sandbox fallback, else listed when needed
	var err error
	if needSB {
		sandboxIDs, err = c.listSandboxesAnyway(fctx, v, l)
		l.SandboxesListed = err == nil
	}
	if err == nil && needCT {
		err = c.listContainersAnyway(fctx, sandboxIDs, needSB, v, l)
		l.ContainersListed = err == nil
	}
	l.FallbackErr = err
	l.FallbackDuration = time.Since(fbStart)
	return l
}

// summary prepares one call's answer: every item is counted into l and
// handed to the visitor.
func (c *Client) summary(call listCall, fields Fields, l *Listing, v *Visitor) *listSummary {
	s := &listSummary{fields: fields}
	if call.sandboxes {
		s.onItem = func(it *Item) {
			l.sandboxStates[stateIndex(it.State)]++
			if v.Sandbox != nil {
				v.Sandbox(it)
			}
		}
	} else {
		s.onItem = func(it *Item) {
			l.containerStates[stateIndex(it.State)]++
			if v.Container != nil {
				v.Container(it)
			}
		}
	}
	return s
}

// listSandboxesAnyway lists every sandbox, streamed when the runtime can,
// otherwise one state at a time, and returns their ids for the per-sandbox
// container lists.
func (c *Client) listSandboxesAnyway(ctx context.Context, v *Visitor, l *Listing) ([]string, error) {
	var ids []string
	s := c.summary(listSandboxes, v.SandboxFields|FieldID, l, v)
	visit := s.onItem
	s.onItem = func(it *Item) {
		ids = append(ids, string(it.ID))
		visit(it)
	}
	if c.streams() {
		err := c.streamAll(ctx, listSandboxes, nil, s)
		streamMeasured(l, kubecontainer.RPCListPodSandbox, s.MaxMessage, err)
		if err == nil {
			return ids, nil
		}
		c.streamFailed(err)
		ids, l.sandboxStates = nil, [4]int{}
		if v.ResetSandboxes != nil {
			v.ResetSandboxes()
		}
	}
	for _, state := range sandboxFilterStates {
		f := &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: state}}
		if err := c.invoke(ctx, listSandboxes, f, s); err != nil {
			return nil, fmt.Errorf("list %v pod sandboxes on %s: %w", state, c.cfg.Endpoint, err)
		}
	}
	return ids, nil
}

// listContainersAnyway lists every container: streamed when the runtime
// can, else one state at a time, and a state that is still too large one
// sandbox at a time. haveIDs says whether sandboxIDs holds every sandbox;
// if not they are listed once, when first needed.
func (c *Client) listContainersAnyway(ctx context.Context, sandboxIDs []string, haveIDs bool, v *Visitor, l *Listing) error {
	s := c.summary(listContainers, v.ContainerFields, l, v)
	if c.streams() {
		err := c.streamAll(ctx, listContainers, &runtimeapi.ContainerFilter{}, s)
		streamMeasured(l, kubecontainer.RPCListContainers, s.MaxMessage, err)
		if err == nil {
			return nil
		}
		c.streamFailed(err)
		l.containerStates = [4]int{}
		if v.ResetContainers != nil {
			v.ResetContainers()
		}
	}
	for _, state := range containerFilterStates {
		if state == runtimeapi.ContainerState_CONTAINER_UNKNOWN && c.rejectsUnknownFilter() {
			l.ContainersIncomplete = true
			continue
		}
		err := c.invoke(ctx, listContainers, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: state}}, s)
		if tooLarge(err) && !haveIDs {
			// The unfiltered sandbox list worked; list the ids once now.
			ids := &listSummary{fields: FieldID}
			ids.onItem = func(it *Item) { sandboxIDs = append(sandboxIDs, string(it.ID)) }
			if err := c.invoke(ctx, listSandboxes, nil, ids); err != nil {
				return fmt.Errorf("list pod sandboxes on %s: %w", c.cfg.Endpoint, err)
			}
			haveIDs = true
		}
		if tooLarge(err) {
			err = nil
			for _, id := range sandboxIDs {
				f := &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: state}, PodSandboxId: id}
				if err = c.invoke(ctx, listContainers, f, s); err != nil {
					if tooLarge(err) {
						// No CRI filter splits one sandbox's containers of one
						// state further; say which sandbox it is.
						err = fmt.Errorf("%w; pod sandbox %s alone holds more than the runtime sends at once (if its pod is gone, crictl stopp %s && crictl rmp %s removes it with its containers)",
							err, id, id, id)
					}
					break
				}
			}
		}
		if err != nil {
			if state == runtimeapi.ContainerState_CONTAINER_UNKNOWN && rejected(err) {
				c.mu.Lock()
				c.unknownFilterRejected = true
				c.mu.Unlock()
				l.ContainersIncomplete = true
				continue
			}
			return fmt.Errorf("list %v containers on %s: %w", state, c.cfg.Endpoint, err)
		}
	}
	return nil
}

// streamBound fills in StreamMessageBytes of a list whose unary call
// returned: its own size within the kubelet's limit, else measured on a
// count-only stream (not in the relist's duration: the kubelet would not
// make it). A list too large to send is measured by the fallback's stream
// instead.
func (c *Client) streamBound(ctx context.Context, call listCall, filter proto.Message, rpc string, err error, l *Listing) {
	st, ok := l.RPCs[rpc]
	if !ok || err != nil || !st.PayloadKnown {
		return
	}
	if st.PayloadBytes <= int64(c.kubeletLimit()) {
		st.StreamMessageBytes, st.StreamKnown = st.PayloadBytes, true
		l.RPCs[rpc] = st
		return
	}
	sctx, cancel := c.call(ctx)
	defer cancel()
	s := &listSummary{onItem: func(*Item) {}}
	serr := c.streamAll(sctx, call, filter, s)
	streamMeasured(l, rpc, s.MaxMessage, serr)
	c.streamFailed(serr)
}

// streamMeasured records the largest message of a stream: the largest read
// when it ended, the size the runtime gave when it refused to send one.
func streamMeasured(l *Listing, rpc string, maxMessage int, err error) {
	st := l.RPCs[rpc]
	switch {
	case err == nil:
		st.StreamMessageBytes, st.StreamKnown = int64(maxMessage), true
	case tooLarge(err):
		if n, _, ok := kubecontainer.ParseMessageSize(status.Convert(err).Message()); ok {
			st.StreamMessageBytes, st.StreamKnown = max(n, int64(maxMessage)), true
		}
	}
	l.RPCs[rpc] = st
}

// streamFailed remembers a runtime that turned out not to stream.
func (c *Client) streamFailed(err error) {
	if status.Code(err) == codes.Unimplemented {
		c.mu.Lock()
		c.streaming = "false"
		c.mu.Unlock()
	}
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
