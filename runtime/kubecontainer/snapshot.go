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
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RPC names as the kubelet's relist issues them, used as the `rpc` label.
const (
	RPCListPodSandbox = "ListPodSandbox"
	RPCListContainers = "ListContainers"
)

// CRI container states as the kubelet names them (kubecontainer.State), the
// values of the `state` label of pleg_containers.
const (
	ContainerCreated = "created"
	ContainerRunning = "running"
	ContainerExited  = "exited"
	ContainerUnknown = "unknown"
)

// ContainerStates lists every CRI container state in exposition order.
var ContainerStates = []string{ContainerCreated, ContainerRunning, ContainerExited, ContainerUnknown}

// CRI sandbox states, the values of the `state` label of pleg_sandboxes.
const (
	SandboxReady    = "ready"
	SandboxNotReady = "notready"
)

// SandboxStates lists every CRI sandbox state in exposition order.
var SandboxStates = []string{SandboxReady, SandboxNotReady}

// Docker's own container states (moby StateString), the values of the
// `state` label of pleg_docker_containers.
const (
	DockerCreated    = "created"
	DockerRunning    = "running"
	DockerPaused     = "paused"
	DockerRestarting = "restarting"
	DockerRemoving   = "removing"
	DockerExited     = "exited"
	// DockerDead is a container whose removal failed half way: cri-dockerd
	// reports it as unknown, and status calls on it can hang.
	DockerDead = "dead"
)

// DockerStates lists Docker's own container states in exposition order.
var DockerStates = []string{DockerCreated, DockerRunning, DockerPaused, DockerRestarting, DockerRemoving, DockerExited, DockerDead}

// RPCStat is what one list call of a relist cost.
type RPCStat struct {
	Duration time.Duration
	// PayloadBytes is the serialized size of the response the kubelet would
	// receive; when the runtime refused to send it, the size it reported.
	PayloadBytes int64
	// PayloadKnown is false when the size could not be learnt (for example
	// the call timed out).
	PayloadKnown bool
	// StreamMessageBytes is the largest message of the same list streamed
	// (StreamContainers / StreamPodSandboxes): what a kubelet with the
	// CRIListStreaming gate receives at once. Measured from the stream when
	// the whole answer was too large for the kubelet, the whole answer's size
	// otherwise (no message of a stream is larger than the whole list).
	// StreamKnown is false when the runtime does not stream or the size
	// could not be learnt.
	StreamMessageBytes int64
	StreamKnown        bool
	// Estimated is true when PayloadBytes was computed from another API (Docker)
	// rather than measured on the CRI wire.
	Estimated bool
	Err       error
}

// Snapshot holds the aggregates of one relist. It never holds a container or
// sandbox list: only counts and sizes survive a relist.
type Snapshot struct {
	// Start is when the relist began; the kubelet stamps this same instant as
	// "last seen active" when the relist succeeds.
	Start time.Time
	// Duration is the wall time of the two unfiltered list calls, the part of
	// the relist the kubelet repeats every second.
	Duration time.Duration
	RPCs     map[string]RPCStat

	// Counted is true when the container and sandbox counts are exact, either
	// from the unfiltered lists or from the fallback.
	Counted    bool
	Containers map[string]int
	Sandboxes  map[string]int
	// Fallback is true when the counts came from filtered or streamed lists
	// because an unfiltered list failed.
	Fallback         bool
	FallbackDuration time.Duration
	// ContainersIncomplete is set when the fallback could not count one
	// state: cri-dockerd rejects a state=UNKNOWN filter. The Docker view, when
	// present, fills the gap.
	ContainersIncomplete bool

	// DockerContainers counts containers by Docker state; nil when no Docker
	// daemon is part of the view.
	DockerContainers map[string]int
	// DockerErr is set when the Docker view was configured but failed.
	DockerErr error

	// ChangedItems and ChangedPods are the churn since the previous complete
	// relist: containers and sandboxes that appeared, went or changed state,
	// and the pods they belong to (each one a GetPodStatus in the kubelet's
	// relist). ChangesKnown is false for the first relist and incomplete ones.
	ChangedItems, ChangedPods int
	ChangesKnown              bool
	// PodUIDs are the pods the kubelet's status pass would inspect after
	// this relist: those with a change since the previous complete relist.
	// On the first complete relist (ChangesKnown false, Counted true) every
	// listed pod is new, and PodUIDs is every pod. Only pods whose uid was
	// listed (on a sandbox) are named. The relister takes them; the
	// snapshot it keeps holds none.
	PodUIDs []string

	// Namespaces is the top-N breakdown of the containers by namespace,
	// nil unless --collector.namespaces is on.
	Namespaces []NamespaceStat

	// Err is the error the kubelet's own relist would have seen: nil when
	// both unfiltered lists returned within the payload limit.
	Err error

	// StreamAccepted is true when a kubelet with the CRIListStreaming gate
	// would have accepted this relist: Err is nil, or the only trouble was
	// a whole answer past the limit while every message of both lists
	// streamed fits it.
	StreamAccepted bool
}

// NewSnapshot returns an empty snapshot with zeroed counts for every state.
func NewSnapshot(start time.Time) *Snapshot {
	s := &Snapshot{
		Start:      start,
		RPCs:       map[string]RPCStat{},
		Containers: map[string]int{},
		Sandboxes:  map[string]int{},
	}
	for _, st := range ContainerStates {
		s.Containers[st] = 0
	}
	for _, st := range SandboxStates {
		s.Sandboxes[st] = 0
	}
	return s
}

// Info describes the runtime the exporter talks to.
type Info struct {
	Runtime    string // e.g. containerd, cri-o, docker
	Version    string
	APIVersion string
	// Streaming is "true" or "false" when the runtime was asked whether it
	// implements CRI list streaming, "" when not known (e.g. Docker API).
	Streaming string
	Endpoint  string
}

// ContainerStateName maps a CRI container state to the kubelet's name for it.
func ContainerStateName(s runtimeapi.ContainerState) string {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return ContainerCreated
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return ContainerRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return ContainerExited
	default:
		return ContainerUnknown
	}
}

// SandboxStateName maps a CRI sandbox state to its label value.
func SandboxStateName(s runtimeapi.PodSandboxState) string {
	if s == runtimeapi.PodSandboxState_SANDBOX_READY {
		return SandboxReady
	}
	return SandboxNotReady
}

// ListItemSize is what one message adds to a list answer, whose items are
// the repeated field 1: tag, length, body. Summing it over the items equals
// proto.Size of the whole answer without building it.
func ListItemSize(m proto.Message) int64 {
	n := proto.Size(m)
	return int64(protowire.SizeTag(1) + protowire.SizeBytes(n))
}
