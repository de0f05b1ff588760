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
	"errors"
)

// Remover removes what `pleg_exporter gc` planned, one item per call. It is
// the product's only write access to a runtime, and the daemon never holds
// one: the gc command opens it on a connection of its own whose allow-list
// adds exactly these removals to the read-only calls.
//
// The runtime's removals force (the CRI has RemoveContainer stop a running
// container and RemovePodSandbox every container in the sandbox), and the
// plan was made from a listing that may be minutes old: so each removal
// first asks the runtime for the item's state now, and leaves it alone with
// ErrChanged when it runs (a container) or is ready or holds containers (a
// sandbox).
type Remover interface {
	// RemoveContainer removes a container that is not running.
	RemoveContainer(ctx context.Context, id string) error
	// RemoveSandbox removes a pod sandbox that is not ready and empty.
	RemoveSandbox(ctx context.Context, id string) error
}

// GCRuntime is a runtime the gc command lists (through the same lister as
// the relist) and removes from.
type GCRuntime interface {
	Runtime
	Remover
}

// ErrGone marks a removal of something that was no longer there, most often
// because the kubelet removed it first: for the gc it is done, not failed.
var ErrGone = errors.New("already gone")

// ErrChanged marks an item left alone because the runtime's state of it no
// longer matches the plan: a container that runs now, a sandbox that is
// ready or holds containers.
var ErrChanged = errors.New("changed since the plan, left alone")
