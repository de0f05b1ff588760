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
	"fmt"
	"math"
	"path/filepath"
	"time"

	"github.com/pleg-exporter/pleg_exporter/internal/fakecri"
	"github.com/pleg-exporter/pleg_exporter/runtime/cri"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// Phase is one recorded relist of a population: what the real CRI client
// returned for it over a real gRPC connection to fakecri, the first relist
// (every pod new) and the next one (the steady state).
type Phase struct {
	Name          string
	Containers    int
	First, Steady *kubecontainer.Snapshot
}

// Recording holds the relists every simulated node replays. Each comes
// from the product's own CRI client (runtime/cri) against the in-process
// CRI server at containerd's send limit: exact payload bytes, the
// ResourceExhausted answer past the limit and the fallback lists' counts,
// the deadline of a runtime that does not answer.
type Recording struct {
	Info kubecontainer.Info
	// Healthy are small nodes of different sizes.
	Healthy []Phase
	// Creeping are the same node at payload ratios RatioStep apart, from
	// CreepFrom to CreepTo of the limit.
	Creeping []Phase
	// Overflow is past the limit: the kubelet's relist fails.
	Overflow Phase
	// Hung is the relist of a runtime that stopped answering, after its
	// deadline.
	Hung *kubecontainer.Snapshot
	// Inspection is one pod's status calls (the status pass of the first
	// relist), replayed for each pod a simulated pass inspects.
	Inspection kubecontainer.PodInspection
	// Probes are the status probes of a healthy node's notready sandboxes.
	Probes []kubecontainer.ProbeResult
	// LimitBytes is the payload limit the recording was made against.
	LimitBytes int64
}

// Ratio is the payload ratio of a phase's steady relist: its larger list
// answer over the limit.
func (r *Recording) Ratio(p Phase) float64 {
	return float64(largest(p.Steady)) / float64(r.LimitBytes)
}

func largest(s *kubecontainer.Snapshot) int64 {
	var n int64
	for _, rpc := range s.RPCs {
		n = max(n, rpc.PayloadBytes)
	}
	return n
}

// RecordConfig says which populations to record.
type RecordConfig struct {
	// Dir holds the fake runtime's socket.
	Dir string
	// HealthySizes are the containers of the healthy phases.
	HealthySizes []int
	// CreepFrom, CreepTo and RatioStep place the creeping phases.
	CreepFrom, CreepTo, RatioStep float64
	// OverflowRatio is the payload of the overflowing phase over the limit.
	OverflowRatio float64
	// PaddingBytes are added to every container (fakecri.BenchSpec).
	PaddingBytes int
}

// DefaultRecordConfig is a fleet of 60-400-container nodes whose creeping
// nodes climb from half the limit to 95 %.
func DefaultRecordConfig(dir string) RecordConfig {
	return RecordConfig{Dir: dir, HealthySizes: []int{60, 150, 400}, CreepFrom: 0.5, CreepTo: 0.95, RatioStep: 0.05,
		OverflowRatio: 1.1, PaddingBytes: 1600}
}

// Record relists each population through the real CRI client.
func Record(ctx context.Context, cfg RecordConfig) (*Recording, error) {
	srv, err := fakecri.Start(filepath.Join(cfg.Dir, "fleet-cri.sock"), fakecri.Options{RuntimeName: "containerd", RuntimeVersion: "v1.7.35"})
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	rec := &Recording{LimitBytes: kubecontainer.GRPCLimitBytes}
	client := func(timeout time.Duration) (*cri.Client, error) {
		return cri.New(cri.Config{Endpoint: srv.Endpoint(), MaxRecvBytes: 256 << 20, Timeout: timeout, ProbeMax: 10, NamespacesTop: 10,
			ProbeTimeout: 5 * time.Second, KubeletLimitBytes: kubecontainer.GRPCLimitBytes})
	}
	c, err := client(30 * time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if rec.Info, err = c.Info(ctx); err != nil {
		return nil, fmt.Errorf("fleet: the fake runtime's version: %w", err)
	}
	// Each population through a client of its own, as a new exporter meets
	// it: its first relist sees every pod new.
	phase := func(name string, n int) (Phase, error) {
		srv.SetPopulation(fakecri.Generate(fakecri.BenchSpec(n, cfg.PaddingBytes)))
		c, err := client(30 * time.Second)
		if err != nil {
			return Phase{}, err
		}
		defer c.Close()
		p := Phase{Name: name, Containers: n, First: c.Relist(ctx), Steady: c.Relist(ctx)}
		if !p.Steady.Counted {
			return p, fmt.Errorf("fleet: %s (%d containers): the relist counted nothing: %v", name, n, p.Steady.Err)
		}
		return p, nil
	}
	for _, n := range cfg.HealthySizes {
		p, err := phase(fmt.Sprintf("healthy-%d", n), n)
		if err != nil {
			return nil, err
		}
		rec.Healthy = append(rec.Healthy, p)
	}
	if len(rec.Healthy) == 0 {
		return nil, fmt.Errorf("fleet: no healthy size to record")
	}
	// The bytes of one container, from the largest healthy node, place the
	// creeping and overflowing populations at their ratios.
	big := rec.Healthy[len(rec.Healthy)-1]
	perContainer := float64(largest(big.Steady)) / float64(big.Containers)
	size := func(ratio float64) int { return int(math.Round(ratio * float64(rec.LimitBytes) / perContainer)) }
	for r := cfg.CreepFrom; r <= cfg.CreepTo+1e-9; r += cfg.RatioStep {
		p, err := phase(fmt.Sprintf("creeping-%.2f", r), size(r))
		if err != nil {
			return nil, err
		}
		rec.Creeping = append(rec.Creeping, p)
	}
	if rec.Overflow, err = phase("overflow", size(cfg.OverflowRatio)); err != nil {
		return nil, err
	}
	if rec.Overflow.Steady.Err == nil {
		return nil, fmt.Errorf("fleet: %d containers did not pass the limit (%d bytes)", rec.Overflow.Containers, largest(rec.Overflow.Steady))
	}
	if err := recordHung(ctx, srv, client, rec); err != nil {
		return nil, err
	}
	srv.SetPopulation(fakecri.Generate(fakecri.BenchSpec(cfg.HealthySizes[0], cfg.PaddingBytes)))
	first := c.Relist(ctx)
	if len(first.PodUIDs) == 0 {
		return nil, fmt.Errorf("fleet: the first relist named no pod")
	}
	rec.Inspection = c.InspectPod(ctx, first.PodUIDs[0], kubecontainer.CallTracker{})
	if rec.Inspection.Err != nil {
		return nil, fmt.Errorf("fleet: inspecting pod %s: %w", first.PodUIDs[0], rec.Inspection.Err)
	}
	if rec.Probes = c.Probe(ctx); len(rec.Probes) == 0 {
		return nil, fmt.Errorf("fleet: no status probe on %d notready sandboxes", first.Sandboxes[kubecontainer.SandboxNotReady])
	}
	return rec, nil
}

// recordHung relists a runtime that holds every call, on a short deadline.
func recordHung(ctx context.Context, srv *fakecri.Server, client func(time.Duration) (*cri.Client, error), rec *Recording) error {
	c, err := client(time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	srv.SetPopulation(fakecri.Generate(fakecri.BenchSpec(rec.Healthy[0].Containers, 0)))
	srv.Block()
	rec.Hung = c.Relist(ctx)
	srv.Unblock()
	if kubecontainer.ErrorCode(rec.Hung.Err) != kubecontainer.CodeDeadlineExceeded {
		return fmt.Errorf("fleet: a held relist ended with %v, not its deadline", rec.Hung.Err)
	}
	return nil
}
