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
