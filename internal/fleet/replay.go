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

package fleet

import (
	"context"
	"errors"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// replay is a node's container runtime: it answers each relist with the
// recorded relist of the node's population at that moment, and holds the
// relist of a frozen runtime until its deadline as the real one does.
type replay struct {
	node    *Node
	relists int
	// phase is the population of the previous relist: a node that changes
	// population (creeping, overflowing) relists as new pods.
	phase string
	// entered, when set, is closed once a held relist waits (History
	// waits for it before it moves the clock on).
	entered chan struct{}
}

var (
	_ kubecontainer.Runtime      = (*replay)(nil)
	_ kubecontainer.PodInspector = (*replay)(nil)
	_ kubecontainer.Prober       = (*replay)(nil)
)

func (r *replay) Relist(ctx context.Context) *kubecontainer.Snapshot {
	clock := r.node.sim.clock
	start := clock.Now()
	if r.node.frozen(start) {
		if r.entered != nil {
			close(r.entered)
			r.entered = nil
		}
		timeout := r.node.sim.cfg.RelistTimeout
		clock.waitUntil(ctx, start.Add(timeout))
		s := *r.node.sim.rec.Hung
		s.Start, s.Duration = start, min(clock.Now().Sub(start), timeout)
		return &s
	}
	p := r.node.phase(start)
	src := p.Steady
	if r.relists == 0 || p.Name != r.phase {
		src = p.First
	}
	r.relists++
	r.phase = p.Name
	s := *src
	s.Start = start
	s.PodUIDs = slices.Clone(src.PodUIDs)
	if !r.node.sim.cfg.Namespaces {
		s.Namespaces = nil
	}
	return &s
}

func (r *replay) Info(context.Context) (kubecontainer.Info, error) { return r.node.sim.rec.Info, nil }

func (r *replay) Inventory(context.Context) (*kubecontainer.Inventory, error) {
	return nil, errors.New("fleet: a simulated node has no inventory")
}

func (r *replay) Close() error { return nil }

// InspectPod replays the recorded inspection's calls for the pod.
func (r *replay) InspectPod(_ context.Context, uid string, track kubecontainer.CallTracker) kubecontainer.PodInspection {
	in := r.node.sim.rec.Inspection
	in.UID, in.Start = uid, r.node.sim.clock.Now()
	in.Calls = slices.Clone(in.Calls)
	for i := range in.Calls {
		in.Calls[i].Start = in.Start
		if track.Begin != nil {
			track.Begin(in.Calls[i].RPC, in.Calls[i].ID)
		}
		if track.End != nil {
			track.End(in.Calls[i])
		}
	}
	return in
}

// Probe replays the recorded probes of the notready sandboxes.
func (r *replay) Probe(context.Context) []kubecontainer.ProbeResult {
	if r.node.frozen(r.node.sim.clock.Now()) {
		return nil
	}
	return slices.Clone(r.node.sim.rec.Probes)
}

// The exporter's version on every simulated node but the old ones.
const (
	Version    = "1.0.0"
	OldVersion = "0.1.0"
)

// sinceOld are the families exporter 0.1.0 did not have (CHANGELOG).
var sinceOld = []string{"pleg_relist_list_in_flight_seconds"}

func buildInfo(l Life) prometheus.Collector {
	v := Version
	if l == OldExporter {
		v = OldVersion
	}
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "pleg_exporter_build_info",
		Help:        "A metric with a constant '1' value labeled by version, revision, branch, goversion from which pleg_exporter was built, and the goos and goarch for the build.",
		ConstLabels: prometheus.Labels{"version": v, "revision": "simulated", "branch": "HEAD", "goversion": "go1.26.8", "goos": "linux", "goarch": "amd64", "tags": "unknown"},
	}, func() float64 { return 1 })
}

// oldExporter serves what an exporter 0.1.0 serves: the families it had.
type oldExporter struct{ g prometheus.Gatherer }

func (o oldExporter) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := o.g.Gather()
	return slices.DeleteFunc(mfs, func(mf *dto.MetricFamily) bool {
		return slices.Contains(sinceOld, mf.GetName())
	}), err
}
