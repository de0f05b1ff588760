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

// Package kubecontainertest has test doubles of the runtime layer for the
// packages above it (pleg, collector), as net/http/httptest has for
// net/http.
package kubecontainertest

import (
	"context"
	"errors"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// Runtime is a kubecontainer.Runtime that returns prepared snapshots, one
// per relist, the last one again once they run out. It has no inventory and
// makes no status probes (Prober does).
type Runtime struct {
	Snaps       []*kubecontainer.Snapshot
	RuntimeInfo kubecontainer.Info
	// During, when set, is called inside each Relist.
	During func()
	n      int
}

// Relist implements kubecontainer.Runtime.
func (s *Runtime) Relist(context.Context) *kubecontainer.Snapshot {
	if s.During != nil {
		s.During()
	}
	snap := s.Snaps[min(s.n, len(s.Snaps)-1)]
	s.n++
	return snap
}

// Info implements kubecontainer.Runtime.
func (s *Runtime) Info(context.Context) (kubecontainer.Info, error) { return s.RuntimeInfo, nil }

// Inventory implements kubecontainer.Runtime: there is none.
func (s *Runtime) Inventory(context.Context) (*kubecontainer.Inventory, error) {
	return nil, errors.New("kubecontainertest: no inventory")
}

// Close implements kubecontainer.Runtime.
func (s *Runtime) Close() error { return nil }

// Prober is a Runtime that also returns prepared status probe results
// (kubecontainer.Prober), the same at every call.
type Prober struct {
	Runtime
	Probes []kubecontainer.ProbeResult
}

// Probe implements kubecontainer.Prober.
func (p *Prober) Probe(context.Context) []kubecontainer.ProbeResult { return p.Probes }

var (
	_ kubecontainer.Runtime = (*Runtime)(nil)
	_ kubecontainer.Prober  = (*Prober)(nil)
)

// Rewind makes the next relist return the first snapshot again.
func (s *Runtime) Rewind() { s.n = 0 }
