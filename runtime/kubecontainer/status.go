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

package kubecontainer

import (
	"context"
	"time"
)

// The status pass: the second half of the kubelet's relist. After the two
// unfiltered lists, the kubelet's generic PLEG calls GetPodStatus for every
// pod with an event since the previous relist and for every pod whose
// inspection failed before (podsToReinspect), one pod after another
// (pkg/kubelet/pleg/generic.go updateCache). GetPodStatus is, in this order
// (pkg/kubelet/kuberuntime/kuberuntime_manager.go):
//
//  1. ListPodSandbox filtered by the pod's uid label;
//  2. PodSandboxStatus of each of its sandboxes, newest first;
//  3. ListContainers filtered by the pod's uid label;
//  4. ContainerStatus of each of its containers.
//
// Each call has its own deadline (--runtime-request-timeout, 2m). NotFound
// is skipped (the item went between the list and the call); any other error
// ends the pod's inspection and the pod is inspected again at the next
// relist. The next relist starts only when the pass ends, so one call that
// hangs until its deadline makes the kubelet's "last seen" two minutes
// older, and two of them turn the node NotReady.

// RPC names of the status pass, the `rpc` label of its metrics. The two
// filtered lists keep the list calls' names: they are the same RPCs.
const (
	RPCPodSandboxStatus = "PodSandboxStatus"
	RPCContainerStatus  = "ContainerStatus"
)

// StatusRPCs lists the calls of one pod's inspection in the kubelet's order.
var StatusRPCs = []string{RPCListPodSandbox, RPCPodSandboxStatus, RPCListContainers, RPCContainerStatus}

// StatusCall is one runtime call of a pod's inspection.
type StatusCall struct {
	RPC string
	// ID is the sandbox or container the call is about; empty for the
	// filtered lists.
	ID       string
	Start    time.Time
	Duration time.Duration
	Err      error
}

// PodInspection is what one GetPodStatus of a pod did.
type PodInspection struct {
	UID string
	// Namespace and Name of the pod, from its sandboxes' metadata (or its
	// containers' labels); empty when nothing of it was listed.
	Namespace, Name string
	// Sandboxes and Containers are the ids the filtered lists returned,
	// sandboxes newest first, as they were inspected.
	Sandboxes, Containers []string
	// Calls are the calls made, in order.
	Calls    []StatusCall
	Start    time.Time
	Duration time.Duration
	// Err is the error that ended the inspection: the first call that
	// failed with anything but NotFound. The kubelet ignores that pod's
	// events and inspects it again at the next relist. nil when inspected.
	Err error
	// Failed is the call that failed, when Err is set.
	Failed StatusCall
}

// CallTracker is told of each call of an inspection as it starts and when it
// ends, so that a scrape can show the call in flight while it hangs. Either
// may be nil.
type CallTracker struct {
	Begin func(rpc, id string)
	End   func(StatusCall)
}

// PodInspector is implemented by runtimes that can perform the kubelet's
// GetPodStatus sequence: read-only calls, each with the relist's deadline.
type PodInspector interface {
	// InspectPod inspects the pod with this uid as the kubelet's
	// GetPodStatus does, one call after another, stopping at the first
	// error that is not NotFound. It never returns early for a slow call:
	// each call waits for its answer or its own deadline, as the kubelet's
	// does, and ctx ends them all.
	InspectPod(ctx context.Context, uid string, track CallTracker) PodInspection
}
