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

package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/pleg-exporter/pleg_exporter/diagnose"
	"github.com/pleg-exporter/pleg_exporter/runtime/detect"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// diagnoseOptions are the flags of the report besides the runtime's.
type diagnoseOptions struct {
	limitBytes int64  // --pleg.grpc-limit-bytes
	top        int    // --collector.namespaces.top
	output     string // --output: text or json
	// status makes the kubelet's GetPodStatus of every pod, each on
	// statusTimeout (--relist.status, --probe.timeout).
	status        bool
	statusTimeout time.Duration
}

// inspectBudget bounds the report's status pass: a node whose calls all
// hang still gets its report, with the pods not reached counted.
const inspectBudget = 2 * time.Minute

// inspectAll makes the kubelet's GetPodStatus of every listed pod, one
// after another as the kubelet does, each pod on its own short deadline, and
// keeps the ones that failed.
func inspectAll(ctx context.Context, in kubecontainer.PodInspector, inv *kubecontainer.Inventory, timeout time.Duration) {
	start := time.Now()
	uids := inv.PodUIDs()
	for i, uid := range uids {
		if ctx.Err() != nil || time.Since(start) > inspectBudget {
			inv.NotInspected = len(uids) - i
			return
		}
		pctx, cancel := context.WithTimeout(ctx, timeout)
		pi := in.InspectPod(pctx, uid, kubecontainer.CallTracker{})
		cancel()
		inv.Inspected++
		if pi.Err != nil {
			inv.Failed = append(inv.Failed, pi)
		}
	}
}

// runDiagnose runs `pleg_exporter diagnose`: one read-only listing and report.
// The status probes follow --probe.max-per-cycle (20 by default; 0 turns them
// off here too). Exit codes: 0 healthy, 1 at risk, 2 the runtime cannot be
// reached, 3 the report could not be written.
func runDiagnose(cfg detect.Config, opts diagnoseOptions) int {
	rt, err := detect.Open(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: error: %v\n", name, err)
		return 2
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	inv, err := rt.Inventory(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: error: cannot list the runtime: %s\n", name, kubecontainer.Printable(err.Error()))
		return 2
	}
	if in, ok := rt.(kubecontainer.PodInspector); ok && opts.status {
		inspectAll(ctx, in, inv, opts.statusTimeout)
	}
	th := diagnose.DefaultThresholds
	th.LimitBytes = opts.limitBytes
	th.Top = opts.top
	th.GCCommand = gcCommandLine(cfg, opts.limitBytes)
	report := diagnose.Build(inv, th, time.Now())
	if opts.output == "json" {
		if err := report.JSON(os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "%s: error: cannot write the report: %v\n", name, err)
			return 3
		}
	} else {
		report.Text(os.Stdout)
	}
	if report.AtRisk {
		return 1
	}
	return 0
}
