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
	"fmt"
	"strconv"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// Labels cri-dockerd sets on the Docker containers it creates.
const (
	typeLabel          = "io.kubernetes.docker.type"
	typeSandbox        = "podsandbox"
	typeContainer      = "container"
	logPathLabel       = "io.kubernetes.container.logpath"
	sandboxIDLabel     = "io.kubernetes.sandbox.id"
	containerNameLabel = "io.kubernetes.container.name"
	// The kubelet's own labels, on sandboxes and containers alike.
	podUIDLabel       = "io.kubernetes.pod.uid"
	podNameLabel      = "io.kubernetes.pod.name"
	podNamespaceLabel = "io.kubernetes.pod.namespace"
	annotationPrefix  = "annotation."
	namePrefix        = "k8s"
)

// Status prefixes of Docker's human status string (moby State.String), the
// field cri-dockerd maps from — not State.
const (
	statusRunningPrefix = "Up"
	statusCreatedPrefix = "Created"
	statusExitedPrefix  = "Exited"
)

// CRIContainerState maps a Docker status string as cri-dockerd does:
// "Up …" (paused too) → RUNNING, "Exited …" → EXITED, "Created" → CREATED,
// anything else (Dead, Restarting, Removal In Progress, "") → UNKNOWN.
func CRIContainerState(status string) runtimeapi.ContainerState {
	switch {
	case strings.HasPrefix(status, statusRunningPrefix):
		return runtimeapi.ContainerState_CONTAINER_RUNNING
	case strings.HasPrefix(status, statusExitedPrefix):
		return runtimeapi.ContainerState_CONTAINER_EXITED
	case strings.HasPrefix(status, statusCreatedPrefix):
		return runtimeapi.ContainerState_CONTAINER_CREATED
	default:
		return runtimeapi.ContainerState_CONTAINER_UNKNOWN
	}
}

// CRISandboxState maps a Docker status string as cri-dockerd does.
func CRISandboxState(status string) runtimeapi.PodSandboxState {
	if strings.HasPrefix(status, statusRunningPrefix) {
		return runtimeapi.PodSandboxState_SANDBOX_READY
	}
	return runtimeapi.PodSandboxState_SANDBOX_NOTREADY
}

// nameParts splits a cri-dockerd name k8s_<a>_<b>_<c>_<d>_<attempt>[_<rand>].
func nameParts(name string) ([]string, uint32, error) {
	name = strings.TrimPrefix(name, "/")
	parts := strings.Split(name, "_")
	if len(parts) == 0 || parts[0] != namePrefix {
		return nil, 0, fmt.Errorf("container is not managed by kubernetes: %q", name)
	}
	if len(parts) < 6 {
		return nil, 0, fmt.Errorf("failed to parse the container name: %q", name)
	}
	attempt, err := strconv.ParseUint(parts[5], 10, 32)
	if err != nil {
		return nil, 0, fmt.Errorf("failed to parse the container name %q: attempt %q: %w", name, parts[5], err)
	}
	return parts, uint32(attempt), nil
}

// ParseContainerName parses k8s_<container>_<pod>_<namespace>_<uid>_<attempt>.
func ParseContainerName(name string) (*runtimeapi.ContainerMetadata, error) {
	parts, attempt, err := nameParts(name)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ContainerMetadata{Name: parts[1], Attempt: attempt}, nil
}

// ParseSandboxName parses k8s_POD_<pod>_<namespace>_<uid>_<attempt>.
func ParseSandboxName(name string) (*runtimeapi.PodSandboxMetadata, error) {
	parts, attempt, err := nameParts(name)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.PodSandboxMetadata{Name: parts[2], Namespace: parts[3], Uid: parts[4], Attempt: attempt}, nil
}

// extractLabels splits Docker labels into the CRI labels and annotations
// cri-dockerd returns, dropping its internal labels.
func extractLabels(in map[string]string, sandbox bool) (labels, annotations map[string]string) {
	labels, annotations = map[string]string{}, map[string]string{}
	for k, v := range in {
		switch k {
		case typeLabel, logPathLabel, sandboxIDLabel:
			continue
		case containerNameLabel:
			if sandbox {
				continue
			}
		}
		if a, ok := strings.CutPrefix(k, annotationPrefix); ok {
			annotations[a] = v
			continue
		}
		labels[k] = v
	}
	return labels, annotations
}

// Kind tells which CRI list a Docker container belongs to.
type Kind int

// Kinds of Docker containers from the kubelet's point of view.
const (
	KindOther Kind = iota // not created by cri-dockerd: invisible to the kubelet
	KindContainer
	KindSandbox
)

// KindOf classifies a container by cri-dockerd's type label.
func KindOf(c *Summary) Kind {
	switch c.Labels[typeLabel] {
	case typeContainer:
		return KindContainer
	case typeSandbox:
		return KindSandbox
	}
	return KindOther
}

// ToCRIContainer builds the message cri-dockerd would send for c.
func ToCRIContainer(c *Summary) (*runtimeapi.Container, error) {
	if len(c.Names) == 0 {
		return nil, fmt.Errorf("container %s has no name", c.ID)
	}
	md, err := ParseContainerName(c.Names[0])
	if err != nil {
		return nil, err
	}
	labels, annotations := extractLabels(c.Labels, false)
	return &runtimeapi.Container{
		Id:           c.ID,
		PodSandboxId: c.Labels[sandboxIDLabel],
		Metadata:     md,
		Image:        &runtimeapi.ImageSpec{Image: c.Image},
		ImageRef:     c.ImageID,
		State:        CRIContainerState(c.Status),
		CreatedAt:    c.Created * int64(time.Second),
		Labels:       labels,
		Annotations:  annotations,
	}, nil
}

// ToCRISandbox builds the message cri-dockerd would send for sandbox c.
func ToCRISandbox(c *Summary) (*runtimeapi.PodSandbox, error) {
	if len(c.Names) == 0 {
		return nil, fmt.Errorf("sandbox %s has no name", c.ID)
	}
	md, err := ParseSandboxName(c.Names[0])
	if err != nil {
		return nil, err
	}
	labels, annotations := extractLabels(c.Labels, true)
	return &runtimeapi.PodSandbox{
		Id:          c.ID,
		Metadata:    md,
		State:       CRISandboxState(c.Status),
		CreatedAt:   c.Created * int64(time.Second),
		Labels:      labels,
		Annotations: annotations,
	}, nil
}

// Entry is one Docker container and what cri-dockerd makes of it: a CRI
// container, a CRI sandbox, or nothing (not the kubelet's, or a name it
// cannot parse, which it skips).
type Entry struct {
	Docker        *Summary // reused for the next container once the entry is handled
	Container     *runtimeapi.Container
	Sandbox       *runtimeapi.PodSandbox
	Unconvertible bool  // kubernetes-labelled, but cri-dockerd cannot parse it
	Bytes         int64 // what it adds to the CRI list answer
}

// convert makes of one Docker container what cri-dockerd would for the
// kubelet's two list calls. Every Docker path reads the list through it, one
// container at a time, and no converted message outlives its entry.
func convert(d *Summary) Entry {
	e := Entry{Docker: d}
	switch KindOf(d) {
	case KindContainer:
		m, err := ToCRIContainer(d)
		if err == nil {
			e.Container, e.Bytes = m, kubecontainer.ListItemSize(m)
		}
		e.Unconvertible = err != nil
	case KindSandbox:
		m, err := ToCRISandbox(d)
		if err == nil {
			e.Sandbox, e.Bytes = m, kubecontainer.ListItemSize(m)
		}
		e.Unconvertible = err != nil
	}
	return e
}
