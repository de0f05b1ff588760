// Package diagnose builds the one-shot report of `pleg_exporter diagnose`:
// which namespaces and pods hold the containers and bytes that push a node
// towards "PLEG is not healthy", which sandboxes hang, and the exact cleanup.
package diagnose

import (
	"time"

	"github.com/pleg-exporter/pleg_exporter/collector"
)

// Container is one listed container, as the kubelet sees it.
type Container struct {
	ID          string
	Name        string
	Pod         string
	Namespace   string
	State       string // CRI state: created, running, exited, unknown
	DockerState string // Docker's own state, Docker runtime only
	CreatedAt   time.Time
	Bytes       int64 // what it adds to the ListContainers answer
}

// Sandbox is one listed pod sandbox.
type Sandbox struct {
	ID        string
	Pod       string
	Namespace string
	State     string // ready, notready
	CreatedAt time.Time
	Bytes     int64
}

// Inventory is the full listing a runtime returned, for one report only.
type Inventory struct {
	Info       collector.Info
	Kind       string // cri or docker: decides the cleanup commands
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
	Probes     []collector.ProbeResult
}
