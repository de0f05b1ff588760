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

package diagnose

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/pleg-exporter/pleg_exporter/gc"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// JSON writes the report as indented JSON. Names are as the runtime gave
// them: encoding/json escapes controls and writes invalid UTF-8 as U+FFFD.
func (r *Report) JSON(w io.Writer) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(r)
}

// Text writes the report for a person.
// Every line goes through Printable: names, reasons and errors come from the
// runtime and must not reach the terminal as escapes or controls.
func (r *Report) Text(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintln(w, kubecontainer.Printable(fmt.Sprintf(format, a...))) }
	r.verdictText(p)
	r.countsText(p)
	r.tablesText(p)
	r.statusText(p)
	r.gcText(p)
	p("")
	if r.GC != nil {
		p("Or by hand")
	} else {
		p("Cleanup")
	}
	for i, s := range r.Cleanup {
		p("  %d. %s", i+1, s.Why)
		if s.Command != "" {
			p("     %s", s.Command)
		}
		if s.Warning != "" {
			p("     WARNING: %s", s.Warning)
		}
	}
}

// printer prints one line of the text report, made printable.
type printer func(format string, a ...any)

func (r *Report) verdictText(p printer) {
	p("pleg_exporter diagnose: %s %s at %s, %s", r.Runtime.Runtime, r.Runtime.Version, r.Runtime.Endpoint, r.Time.Format(time.RFC3339))
	p("")
	if r.AtRisk {
		p("AT RISK:")
		for _, s := range r.Reasons {
			p("  - %s", s)
		}
	} else {
		p("Healthy: nothing close to the kubelet's limits.")
	}
	if r.ListError != "" {
		p("The kubelet's unfiltered list fails: %s", r.ListError)
	}
	if r.Fallback {
		p("Counted through filtered lists, past the limit the kubelet cannot read.")
	}
	if r.Incomplete != "" {
		p("Not listed: %s", r.Incomplete)
	}
}

func (r *Report) countsText(p printer) {
	p("")
	p("Containers  %s", states(r.Containers, kubecontainer.ContainerStates))
	if r.Docker != nil {
		p("Docker      %s", states(r.Docker, kubecontainer.DockerStates))
	}
	p("Sandboxes   %s", states(r.Sandboxes, kubecontainer.SandboxStates))
	for _, pl := range r.Payload {
		fit := "(no items)"
		if pl.Items > 0 {
			fit = fmt.Sprintf("(~%d more items fit)", max(pl.MoreFit, 0))
		}
		p("Payload     %-15s %10s  %5.1f%% of %s  %s", pl.RPC, size(pl.Bytes), 100*pl.Ratio, size(pl.LimitBytes), fit)
	}
}

// tablesText prints the top namespaces and pods, and the suspects.
func (r *Report) tablesText(p printer) {
	table := func(title string, rows []Share) {
		if len(rows) == 0 {
			return
		}
		p("")
		p("%s", title)
		p("  %-48s %10s %10s %10s %7s", "", "containers", "exited", "bytes", "share")
		for _, s := range rows {
			p("  %-48s %10d %10d %10s %6.1f%%", s.Name, s.Containers, s.ByState[kubecontainer.ContainerExited], size(s.Bytes), 100*s.Fraction)
		}
	}
	table("Top namespaces by containers", r.Namespaces)
	table("Top namespaces by ListContainers bytes", r.NSBytes)
	table("Top pods by containers", r.Pods)
	table("Top pods by ListContainers bytes", r.PodBytes)
	suspects := func(title string, rows []Suspect, total int) {
		if total == 0 {
			return
		}
		p("")
		p("%s (%d)", title, total)
		for _, s := range rows {
			p("  %-13s %-60s %-24s %s", kubecontainer.ShortID(s.ID), s.Where, s.State, s.Age)
		}
	}
	suspects("Unknown or dead containers, oldest first", r.Suspects[:min(len(r.Suspects), 20)], len(r.Suspects))
	suspects("Notready sandboxes, oldest first", r.NotReady, r.NotReadyAll)
}

// statusText prints the slowest status calls and the pods whose status
// calls fail.
func (r *Report) statusText(p printer) {
	if len(r.Probes) > 0 {
		p("")
		p("Slowest status calls")
		for _, pr := range r.Probes {
			p("  %-9s %-13s %-50s %8s  %s", pr.Kind, kubecontainer.ShortID(pr.ID), pr.Where, pr.Duration, pr.Result)
		}
	}
	if len(r.StatusFailures) > 0 {
		p("")
		p("Pods whose status calls fail (the kubelet's relist waits on each; runbook: PLEGStatusCallHanging)")
		for _, f := range r.StatusFailures {
			p("  %-50s %s %s: %s after %s", f.Pod, f.RPC, kubecontainer.ShortID(f.ID), f.Code, f.Duration)
			p("    %s", f.Error)
			for _, l := range f.Look {
				p("    $ %s", l)
			}
		}
	}
	if r.Inspected > 0 || r.NotInspected > 0 {
		p("")
		p("Status of %d pods inspected as the kubelet does (%d failed, %d not reached)", r.Inspected, len(r.StatusFailures), r.NotInspected)
	}
}

// gcText leads the cleanup with the gc command the node needs.
func (r *Report) gcText(p printer) {
	g := r.GC
	if g == nil {
		return
	}
	p("")
	p("Fix first: remove what the kubelet's own container GC would, through lists that fit")
	fits := "fits under the limit"
	if !g.Fits {
		fits = "STILL OVER THE LIMIT"
	}
	who := "The kubelet's own policy"
	if g.Policy == gc.PolicyFinishedPods {
		who = "With --finished-pods it"
	}
	p("  %s removes %d containers and %d sandboxes: ListContainers %s → %s (%s).", who, g.Containers, g.Sandboxes,
		size(g.Before[kubecontainer.RPCListContainers]), size(g.After[kubecontainer.RPCListContainers]), fits)
	p("  %s.", capitalize(g.Why))
	if g.FinishedPods > 0 {
		p("  It removes %d pods that have no ready sandbox, and with them their logs.", g.FinishedPods)
	}
	p("  See the plan per namespace (changes nothing):  %s", g.DryRun)
	p("  Apply it:                                       %s", g.Command)
}

var states = kubecontainer.FormatStates
