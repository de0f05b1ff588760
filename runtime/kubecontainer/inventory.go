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

import "time"

// Views of an Inventory: which API it was listed through, which decides the
// cleanup commands a report prints.
const (
	ViewCRI    = "cri"
	ViewDocker = "docker"
)

// ContainerDockerOnly is the State of a Docker container the kubelet does not
// see (not created by cri-dockerd): it has a Docker state and no CRI one, and
// stays out of the CRI counts and the payload.
const ContainerDockerOnly = "docker-only"

// Container is one listed container, as the kubelet sees it.
type Container struct {
	ID        string
	Name      string // the container's name in its pod (CRI metadata)
	Attempt   uint32 // CRI metadata: how many times the kubelet recreated it
	Pod       string
	Namespace string
	// PodUID is the kubelet's io.kubernetes.pod.uid label, SandboxID the
	// sandbox the container runs in: who owns it, for the container GC.
	// An empty PodUID means the kubelet did not create the container.
	PodUID      string
	SandboxID   string
	State       string // CRI state: created, running, exited, unknown; or ContainerDockerOnly
	DockerState string // Docker's own state, Docker runtime only
	CreatedAt   time.Time
	Bytes       int64 // what it adds to the ListContainers answer
}

// Sandbox is one listed pod sandbox.
type Sandbox struct {
	ID        string
	Pod       string
	Namespace string
	PodUID    string // CRI metadata uid
	Attempt   uint32
	State     string // ready, notready
	CreatedAt time.Time
	Bytes     int64
}

// Inventory is the full listing a runtime returned, for one report only.
type Inventory struct {
	Info       Info
	View       string // ViewCRI or ViewDocker
	Containers []Container
	Sandboxes  []Sandbox
	// Payload of each unfiltered answer (exact, or from the runtime's error).
	Payload map[string]int64
	// ListErr is what the kubelet's unfiltered list would fail with.
	ListErr error
	// Fallback is true when the listing went through filtered lists.
	Fallback bool
	// Incomplete names what could not be listed (e.g. unknown containers on
	// cri-dockerd, whose filter the runtime rejects).
	Incomplete string
	// DockerAPI is true when the items were listed through the Docker API
	// rather than a CRI endpoint: its sandboxes are the pause containers
	// only (cri-dockerd keeps a checkpoint of each beside it).
	DockerAPI bool
	Probes    []ProbeResult
	// Inspected is how many pods had the kubelet's GetPodStatus made
	// (the diagnose command's status pass), NotInspected how many it did
	// not reach in its time; Failed holds the inspections that failed.
	Inspected, NotInspected int
	Failed                  []PodInspection
}

// PodUIDs returns the uid of every listed pod, sandboxes' first, each once.
func (inv *Inventory) PodUIDs() []string {
	seen := map[string]bool{}
	var out []string
	add := func(uid string) {
		if uid != "" && !seen[uid] {
			seen[uid] = true
			out = append(out, uid)
		}
	}
	for _, s := range inv.Sandboxes {
		add(s.PodUID)
	}
	for _, c := range inv.Containers {
		add(c.PodUID)
	}
	return out
}
