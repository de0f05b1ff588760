package kubecontainer

import (
	"context"
	"time"
)

// Probe kinds, the `kind` label of the status probe metrics.
const (
	ProbeSandbox   = "sandbox"   // PodSandboxStatus on a notready sandbox
	ProbeContainer = "container" // ContainerStatus on an unknown container
)

// ProbeResult is one status call the exporter made on a suspect sandbox or
// container: the per-pod calls of the kubelet's relist that hang on broken
// (Docker Dead) sandboxes until their deadline.
type ProbeResult struct {
	Kind     string
	ID       string
	Duration time.Duration
	TimedOut bool
	Err      error
}

// Prober is implemented by runtimes that can probe the status calls of the
// sandboxes and containers their latest relist found suspect.
type Prober interface {
	Probe(ctx context.Context) []ProbeResult
}
