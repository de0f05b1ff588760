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

package gc

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// Names of the two policies the dry run sets side by side.
const (
	PolicyKubelet      = "kubelet"
	PolicyFinishedPods = "finished-pods"
)

// Report is what the command prints: both policies' plans for one
// inventory, the one the flags selected, the one the node needs, and after
// --apply what was done.
type Report struct {
	Time       time.Time          `json:"time"`
	Runtime    kubecontainer.Info `json:"runtime"`
	LimitBytes int64              `json:"limit_bytes"`
	Containers map[string]int     `json:"containers"`
	Sandboxes  map[string]int     `json:"sandboxes"`
	Before     map[string]int64   `json:"before_bytes"`
	// Plans by policy name.
	Plans    map[string]*Plan `json:"plans"`
	Selected string           `json:"selected"`
	// Recommended is the policy the node needs, Why says so, Command is
	// the command line that applies it.
	Recommended string `json:"recommended"`
	Why         string `json:"why"`
	Command     string `json:"command"`
	// Applied is set by --apply, and Check by the relist made after it.
	Applied *Result `json:"applied,omitempty"`
	Check   *Check  `json:"check,omitempty"`
	// Incomplete names what the listing could not see (nothing of it is
	// removed).
	Incomplete string `json:"incomplete,omitempty"`
}

// NewReport plans both policies (p's keep, min-age and until-ratio; with
// and without finished pods) and recommends one: the kubelet's own when it
// brings every answer under warnRatio × the limit (where the alerts
// resolve), else --finished-pods when that does, else whichever leaves
// less. command is the command line the recommendation is built on.
func NewReport(inv *kubecontainer.Inventory, p Policy, warnRatio float64, command string, now time.Time) *Report {
	r := &Report{Time: now.UTC(), Runtime: inv.Info, LimitBytes: p.LimitBytes, Incomplete: inv.Incomplete,
		Containers: map[string]int{}, Sandboxes: map[string]int{}, Plans: map[string]*Plan{}}
	for _, s := range kubecontainer.ContainerStates {
		r.Containers[s] = 0
	}
	for _, s := range kubecontainer.SandboxStates {
		r.Sandboxes[s] = 0
	}
	for _, c := range inv.Containers {
		if c.State != kubecontainer.ContainerDockerOnly {
			r.Containers[c.State]++
		}
	}
	for _, s := range inv.Sandboxes {
		r.Sandboxes[s.State]++
	}
	kp, fp := p, p
	kp.FinishedPods, fp.FinishedPods = false, true
	r.Plans[PolicyKubelet] = Build(inv, kp, now)
	r.Plans[PolicyFinishedPods] = Build(inv, fp, now)
	r.Before = r.Plans[PolicyKubelet].Before
	r.Selected = PolicyKubelet
	if p.FinishedPods {
		r.Selected = PolicyFinishedPods
	}

	k, f := r.Plans[PolicyKubelet], r.Plans[PolicyFinishedPods]
	warn := warnRatio * float64(p.LimitBytes)
	worst := func(m map[string]int64) float64 {
		w := 0.0
		for _, b := range m {
			w = max(w, float64(b))
		}
		return w
	}
	pct := func(m map[string]int64) string { return fmt.Sprintf("%.1f%%", 100*worst(m)/float64(p.LimitBytes)) }
	switch {
	case len(k.Actions) == 0 && len(f.Actions) == 0 && (k.Kept.UntilRatio > 0 || f.Kept.UntilRatio > 0):
		r.Recommended, r.Why = "", fmt.Sprintf("the answers are already under --until-ratio (the largest at %s of the limit)", pct(r.Before))
	case len(k.Actions) == 0 && len(f.Actions) == 0:
		r.Recommended, r.Why = "", "the kubelet's policy and --finished-pods both find nothing to remove"
	case worst(k.After) < warn && len(k.Actions) == 0:
		r.Recommended, r.Why = "", fmt.Sprintf("the kubelet's policy finds nothing to remove and the largest answer is at %s of the limit, under the %.0f%% where the alerts resolve; --finished-pods would remove %d more items if those pods are gone", pct(k.After), 100*warnRatio, len(f.Actions))
	case worst(k.After) < warn:
		r.Recommended = PolicyKubelet
		r.Why = fmt.Sprintf("the kubelet's own policy brings the largest answer to %s of the limit, under the %.0f%% where the alerts resolve", pct(k.After), 100*warnRatio)
	case worst(f.After) < warn:
		r.Recommended = PolicyFinishedPods
		r.Why = fmt.Sprintf("the kubelet's own policy leaves the largest answer at %s of the limit; removing the finished pods as well brings it to %s (it costs their logs)", pct(k.After), pct(f.After))
	case worst(f.After) < worst(k.After):
		r.Recommended = PolicyFinishedPods
		r.Why = fmt.Sprintf("neither policy brings the largest answer under %.0f%% of the limit (kubelet's: %s, --finished-pods: %s): the rest is running containers and the newest attempts of live pods; see pleg_exporter diagnose for who holds them, and --keep-per-container=0", 100*warnRatio, pct(k.After), pct(f.After))
	default:
		r.Recommended = PolicyKubelet
		r.Why = fmt.Sprintf("neither policy brings the largest answer under %.0f%% of the limit (%s after the kubelet's): the rest is running containers and the newest attempts of live pods; see pleg_exporter diagnose for who holds them", 100*warnRatio, pct(k.After))
	}
	if r.Recommended != "" {
		r.Command = command + " --apply"
		if r.Recommended == PolicyFinishedPods {
			r.Command += " --finished-pods"
		}
		r.Command += policyFlags(p)
	}
	return r
}

// policyFlags are the flags that made the plan the report shows, besides
// --finished-pods: the command it recommends must remove exactly that.
func policyFlags(p Policy) string {
	var s string
	if p.KeepPerContainer != 1 {
		s += fmt.Sprintf(" --keep-per-container=%d", p.KeepPerContainer)
	}
	if p.MinAge > 0 {
		s += " --min-age=" + p.MinAge.String()
	}
	if p.UntilRatio > 0 {
		s += fmt.Sprintf(" --until-ratio=%g", p.UntilRatio)
	}
	return s
}

// Check is the kubelet's relist made once more after the run: its two
// unfiltered calls, and their answers against its limit.
type Check struct {
	Payload map[string]int64 `json:"payload_bytes"`
	// Fits is true when both calls answered under the limit: the kubelet's
	// next relist (and its container GC) succeeds.
	Fits  bool   `json:"fits"`
	Error string `json:"error,omitempty"`
}

// Verify records the relist made after the run.
func (r *Report) Verify(s *kubecontainer.Snapshot) {
	c := &Check{Payload: map[string]int64{}, Fits: s.Err == nil}
	if s.Err != nil {
		c.Error = s.Err.Error()
	}
	for rpc, st := range s.RPCs {
		if st.PayloadKnown {
			c.Payload[rpc] = st.PayloadBytes
			if st.PayloadBytes >= r.LimitBytes {
				c.Fits = false
			}
		}
	}
	r.Check = c
}

// Plan is the plan of the policy the flags selected.
func (r *Report) Plan() *Plan { return r.Plans[r.Selected] }

// JSON writes the report as indented JSON.
func (r *Report) JSON(w io.Writer) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(r)
}

// nsRow is one namespace's part of a plan.
type nsRow struct {
	containers, sandboxes int
	bytes                 int64
	pods                  map[string]bool // pods that lose everything (finished)
}

func byNamespace(p *Plan) map[string]*nsRow {
	m := map[string]*nsRow{}
	for _, a := range p.Actions {
		ns := a.Namespace
		if ns == "" {
			ns = kubecontainer.NoNamespace
		}
		row := m[ns]
		if row == nil {
			row = &nsRow{pods: map[string]bool{}}
			m[ns] = row
		}
		if a.Kind == KindSandbox {
			row.sandboxes++
		} else {
			row.containers++
			row.bytes += a.Bytes
		}
		if a.Rule == RuleFinishedPod {
			row.pods[a.PodUID] = true
		}
	}
	return m
}

// maxNamespaceRows bounds the table; the rest is summed on one line.
const maxNamespaceRows = 15

// Text writes the plan (and the run, after --apply) for a person. Every
// line goes through Printable: names come from the runtime.
func (r *Report) Text(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintln(w, kubecontainer.Printable(fmt.Sprintf(format, a...))) }
	p("pleg_exporter gc: %s %s at %s, %s", r.Runtime.Runtime, r.Runtime.Version, r.Runtime.Endpoint, r.Time.Format(time.RFC3339))
	if r.Applied == nil {
		p("DRY RUN: nothing was removed; --apply removes what the selected policy (*) plans.")
	}
	p("")
	p("Now     %s", r.answer(r.Before))
	p("        containers %s; sandboxes %s (limit %s)", kubecontainer.FormatStates(r.Containers, kubecontainer.ContainerStates), kubecontainer.FormatStates(r.Sandboxes, kubecontainer.SandboxStates), kubecontainer.FormatBytes(r.LimitBytes))
	if r.Incomplete != "" {
		p("        not listed, so not removed: %s", r.Incomplete)
	}
	p("")
	_, f := r.namespaceTable(p)
	p("")
	p("After   the kubelet's policy:  %s", r.answer(r.Plans[PolicyKubelet].After))
	p("        and --finished-pods:   %s", r.answer(r.Plans[PolicyFinishedPods].After))
	p("Left    %s", kept(r.Plan().Kept))
	if n := len(f.pods); n > 0 {
		p("        --finished-pods removes %d pods that have no ready sandbox, containers and sandboxes: kubectl logs of those pods stops working. Use it for pods that are gone (finished Jobs, deleted or evicted pods); a pod restarting its sandbox right now would lose its previous containers.", n)
	}
	p("")
	if r.Recommended == "" {
		p("Nothing to do: %s.", r.Why)
	} else {
		p("Recommended: %s", r.Command)
		p("        %s.", r.Why)
	}
	if r.Applied != nil {
		r.Applied.text(p, r.Plan(), float64(r.LimitBytes))
	}
	r.checkText(p)
}

// answer is the two list answers of m against the limit, in a line.
func (r *Report) answer(m map[string]int64) string {
	limit := float64(r.LimitBytes)
	var parts []string
	for _, rpc := range []string{kubecontainer.RPCListContainers, kubecontainer.RPCListPodSandbox} {
		b := m[rpc]
		fits := "fits"
		if float64(b) >= limit {
			fits = "TOO LARGE: the kubelet's relist and GC fail"
		}
		parts = append(parts, fmt.Sprintf("%s %s (%.1f%% of the limit, %s)", rpc, kubecontainer.FormatBytes(b), 100*float64(b)/limit, fits))
	}
	return strings.Join(parts, "; ")
}

// namespaceTable prints both policies' removals side by side, per
// namespace (the largest first, the rest summed in one row), and the
// totals, which it returns.
func (r *Report) namespaceTable(p func(string, ...any)) (k, f *nsRow) {
	kp, fp := r.Plans[PolicyKubelet], r.Plans[PolicyFinishedPods]
	mark := func(name string) string {
		if name == r.Selected {
			return "* "
		}
		return "  "
	}
	p("  %-34s %s%-34s %s%s", "", mark(PolicyKubelet), fmt.Sprintf("the kubelet's policy (keep %d)", kp.Policy.KeepPerContainer), mark(PolicyFinishedPods), "and --finished-pods")
	p("  %-34s %10s %10s %12s   %10s %10s %12s %6s", "namespace", "containers", "sandboxes", "bytes", "containers", "sandboxes", "bytes", "pods")
	kn, fn := byNamespace(kp), byNamespace(fp)
	names := make([]string, 0, len(fn))
	for ns := range fn {
		names = append(names, ns)
	}
	for ns := range kn {
		if fn[ns] == nil {
			names = append(names, ns)
		}
	}
	sort.Slice(names, func(i, j int) bool {
		bi, bj := rowBytes(fn[names[i]])+rowBytes(kn[names[i]]), rowBytes(fn[names[j]])+rowBytes(kn[names[j]])
		if bi != bj {
			return bi > bj
		}
		return names[i] < names[j]
	})
	row := func(label string, a, b *nsRow) {
		a, b = a.orZero(), b.orZero()
		p("  %-34s %10d %10d %12s   %10d %10d %12s %6d", clip(label, 34), a.containers, a.sandboxes, kubecontainer.FormatBytes(a.bytes), b.containers, b.sandboxes, kubecontainer.FormatBytes(b.bytes), len(b.pods))
	}
	rest := [2]*nsRow{newRow(), newRow()}
	for i, ns := range names {
		if i < maxNamespaceRows {
			row(ns, kn[ns], fn[ns])
			continue
		}
		rest[0].add(kn[ns])
		rest[1].add(fn[ns])
	}
	if len(names) > maxNamespaceRows {
		row(fmt.Sprintf("(%d more namespaces)", len(names)-maxNamespaceRows), rest[0], rest[1])
	}
	k, f = newRow(), newRow()
	for _, r := range kn {
		k.add(r)
	}
	for _, r := range fn {
		f.add(r)
	}
	row("total", k, f)
	return k, f
}

func newRow() *nsRow { return &nsRow{pods: map[string]bool{}} }

// add sums src (which may be nil) into t.
func (t *nsRow) add(src *nsRow) {
	if src == nil {
		return
	}
	t.containers += src.containers
	t.sandboxes += src.sandboxes
	t.bytes += src.bytes
	for uid := range src.pods {
		t.pods[uid] = true
	}
}

func (t *nsRow) orZero() *nsRow {
	if t == nil {
		return newRow()
	}
	return t
}

// checkText says what the kubelet's relist calls answered after the run.
func (r *Report) checkText(p func(string, ...any)) {
	c := r.Check
	if c == nil {
		return
	}
	p("")
	what := fmt.Sprintf("ListContainers %s, ListPodSandbox %s", kubecontainer.FormatBytes(c.Payload[kubecontainer.RPCListContainers]), kubecontainer.FormatBytes(c.Payload[kubecontainer.RPCListPodSandbox]))
	switch {
	case c.Fits:
		p("Checked: the kubelet's relist calls answer again (%s), under the %s limit: its relist and container GC work.", what, kubecontainer.FormatBytes(r.LimitBytes))
	case c.Error != "":
		p("Checked: the kubelet's relist still fails: %s. Run pleg_exporter diagnose.", c.Error)
	default:
		p("Checked: the kubelet's relist calls answer %s: still over the %s limit. Run pleg_exporter diagnose.", what, kubecontainer.FormatBytes(r.LimitBytes))
	}
}

func (res *Result) text(p func(string, ...any), plan *Plan, limit float64) {
	p("")
	rate := 0.0
	if s := res.Duration.Seconds(); s > 0 {
		rate = float64(res.Removals) / s
	}
	p("Applied the %s plan: removed %d containers and %d sandboxes, %d already gone, %d left alone, %d failed, of %d planned, in %s (%d removals, %.1f/s)",
		orKubelet(plan), res.Removed[KindContainer], res.Removed[KindSandbox], res.Gone, len(res.LeftAlone), len(res.Failures), res.Planned,
		res.Duration.Round(100*time.Millisecond), res.Removals, rate)
	for _, rpc := range []string{kubecontainer.RPCListContainers, kubecontainer.RPCListPodSandbox} {
		b := res.Left[rpc]
		fits := "fits under the limit"
		if float64(b) >= limit {
			fits = "STILL OVER THE LIMIT"
		}
		p("        %s now %s (%.1f%% of the limit): %s", rpc, kubecontainer.FormatBytes(b), 100*float64(b)/limit, fits)
	}
	items := func(title string, fs []Failure, most int) {
		if len(fs) == 0 {
			return
		}
		p("")
		p(title, len(fs))
		for i, f := range fs {
			if i == most {
				p("  … %d more (--output=json lists them all)", len(fs)-most)
				break
			}
			a := f.Action
			p("  %s %s %s/%s%s: %s", a.Kind, kubecontainer.ShortID(a.ID), a.Namespace, a.Pod, slashName(a.Name), f.Error)
			if f.Hint != "" {
				p("      → %s", f.Hint)
			}
		}
	}
	items("Left alone (%d): changed since the plan", res.LeftAlone, 10)
	items("Failed (%d), skipped:", res.Failures, 20)
	switch {
	case res.GaveUp != "":
		p("")
		p("GAVE UP: %s. %d removals not made. Check the runtime (systemctl status, its log), then run the same command again: it lists again and continues.", res.GaveUp, res.NotRun)
	case res.Interrupted:
		p("")
		p("INTERRUPTED: %d removals not made. Run the same command again to continue: it lists again and removes what is left.", res.NotRun)
	}
}

func orKubelet(p *Plan) string {
	if p.Policy.FinishedPods {
		return "--finished-pods"
	}
	return "kubelet's-policy"
}

func slashName(n string) string {
	if n == "" {
		return ""
	}
	return "/" + n
}

func rowBytes(r *nsRow) int64 {
	if r == nil {
		return 0
	}
	return r.bytes
}

func kept(k Kept) string {
	var parts []string
	for _, x := range []struct {
		n    int
		what string
	}{
		{k.Running, "running containers"}, {k.Newest, "newest containers of their (pod, name)"},
		{k.UnknownUnsure, "unknown containers (cri-dockerd without Docker's view cannot tell dead from restarting: give --docker.host)"},
		{k.SandboxesUnchecked, "sandboxes not checked or not removable here (the listing missed containers, or the Docker API cannot remove cri-dockerd's checkpoints: the kubelet removes them once it can)"},
		{k.LiveInDocker, "containers alive in Docker"}, {k.Young, "containers younger than --min-age"},
		{k.NotKubelets, "items the kubelet did not create"}, {k.ReadySandbox, "ready sandboxes"},
		{k.ActiveSandbox, "sandboxes holding containers"}, {k.NewestSandbox, "newest sandboxes of their pod"},
		{k.UntilRatio, "removals past --until-ratio"},
	} {
		if x.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", x.n, x.what))
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// clip shortens s to n characters (runes, as fmt pads a column), the last
// one an ellipsis; it never cuts inside a character (a pod name is UTF-8).
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
