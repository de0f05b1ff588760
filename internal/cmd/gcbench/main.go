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

// Command gcbench measures `pleg_exporter gc` against the manual cleanup it
// replaces, `crictl ps -a --state exited -q | xargs -n 100 crictl rm`, on a
// private containerd, and writes docs/gc-benchmark.md. Every figure comes
// from one run of this program: the tools take turns on fresh populations of
// the same shape (the order alternates round by round), each timed as a
// whole process from start to exit, and each must leave no exited container.
//
// Two populations:
//   - under the limit, where both work: removals per second, and the calls
//     per second gc puts on the runtime at its default --rate;
//   - past the 16 MiB limit, where crictl's list fails like the kubelet's.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/internal/measure"
	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
)

var (
	outFile = flag.String("out", "docs/gc-benchmark.md", "report to write")
	crictl  = flag.String("crictl", "", "crictl binary (make bench-gc builds it)")
	rounds  = flag.Int("rounds", 3, "rounds; each tool runs once per round")
	pods    = flag.Int("pods", 20, "pods of the population under the limit")
	perPod  = flag.Int("per-pod", 25, "exited attempts per pod")
)

type tool struct {
	name string
	cmd  func(endpoint string) *exec.Cmd
}

type sample struct {
	wall    time.Duration
	removed int
	calls   int           // gc's removal calls (from its JSON)
	callDur time.Duration // gc's removal phase
}

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gcbench:", err)
		os.Exit(1)
	}
}

func run() error {
	if *crictl == "" {
		return fmt.Errorf("--crictl is required")
	}
	work, err := os.MkdirTemp("", "gcbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	bin := filepath.Join(work, "pleg_exporter")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/pleg_exporter").CombinedOutput(); err != nil {
		return fmt.Errorf("build: %v\n%s", err, out)
	}
	ctd, err := testenv.StartContainerd(filepath.Join(work, "containerd"))
	if err != nil {
		return err
	}
	defer ctd.Stop()
	cc, err := ctd.Dial(256 << 20)
	if err != nil {
		return err
	}
	defer cc.Close()
	rs := runtimeapi.NewRuntimeServiceClient(cc)
	b := &bench{ctx: context.Background(), rs: rs, pc: &testenv.PodClient{RS: rs, LogDir: filepath.Join(work, "pods")}, endpoint: ctd.Endpoint()}

	gcCmd := func(extra ...string) func(string) *exec.Cmd {
		return func(ep string) *exec.Cmd {
			return exec.Command(bin, append([]string{"gc", "--apply", "--output=json", "--keep-per-container=0", "--runtime.endpoint=" + ep}, extra...)...)
		}
	}
	crictlCmd := func(ep string) *exec.Cmd {
		c := exec.Command("bash", "-o", "pipefail", "-c", "crictl ps -a --state exited -q | xargs -r -n 100 crictl rm")
		c.Env = append(os.Environ(), "CONTAINER_RUNTIME_ENDPOINT="+ep, "IMAGE_SERVICE_ENDPOINT="+ep,
			"PATH="+filepath.Dir(*crictl)+":"+os.Getenv("PATH"))
		return c
	}
	tools := []tool{
		{"crictl ps -a --state exited -q | xargs -n 100 crictl rm", crictlCmd},
		{"pleg_exporter gc --apply --keep-per-container=0 (default --rate=50)", gcCmd()},
		{"pleg_exporter gc --apply --keep-per-container=0 --rate=100000", gcCmd("--rate=100000")},
	}
	samples, popN, popDur, err := b.underLimit(tools)
	if err != nil {
		return err
	}

	// Past the limit: ten pods of padded attempts, 64 KiB each.
	big, err := b.pods("leaky", "cron-%d", 10)
	if err != nil {
		return err
	}
	bigN, _, err := b.populate(big, 28, strings.Repeat("p", 64<<10))
	if err != nil {
		return err
	}
	crictlPast, crictlMsg, crictlErr := b.timeTool(tools[0])
	leftAfterCrictl, _ := b.exitedLeft()
	gcPast, gcMsg, gcErr := b.timeTool(tools[1])
	if gcErr != nil {
		return fmt.Errorf("gc past the limit: %v: %s", gcErr, gcMsg)
	}
	leftAfterGC, _ := b.exitedLeft()

	return write(samples, tools, popN, popDur, bigN, crictlPast, crictlMsg, crictlErr, leftAfterCrictl, gcPast, leftAfterGC)
}

// bench is the private containerd the tools take turns on.
type bench struct {
	ctx      context.Context
	rs       runtimeapi.RuntimeServiceClient
	pc       *testenv.PodClient
	endpoint string
	attempt  uint32 // the next attempt number of the "job" containers
}

// pods runs n pod sandboxes in namespace ns, named by format.
func (b *bench) pods(ns, format string, n int) ([]*testenv.Pod, error) {
	var ps []*testenv.Pod
	for i := 0; i < n; i++ {
		p, err := b.pc.RunPod(b.ctx, ns, fmt.Sprintf(format, i))
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// underLimit makes a fresh population of exited containers for each tool
// in turn, rotating the order every round, and times its removal.
func (b *bench) underLimit(tools []tool) (map[string][]sample, int, []time.Duration, error) {
	podList, err := b.pods("bench", "job-%d", *pods)
	if err != nil {
		return nil, 0, nil, err
	}
	samples := map[string][]sample{}
	var popN int
	var popDur []time.Duration
	for r := 0; r < *rounds; r++ {
		for i := range tools {
			tl := tools[(i+r)%len(tools)]
			n, d, err := b.populate(podList, *perPod, "")
			if err != nil {
				return nil, 0, nil, err
			}
			popN = n
			popDur = append(popDur, d)
			s, msg, err := b.timeTool(tl)
			if err != nil {
				return nil, 0, nil, fmt.Errorf("%s: %v: %s", tl.name, err, msg)
			}
			left, err := b.exitedLeft()
			if err != nil {
				return nil, 0, nil, err
			}
			if left != 0 {
				return nil, 0, nil, fmt.Errorf("%s left %d exited containers", tl.name, left)
			}
			s.removed = n
			samples[tl.name] = append(samples[tl.name], s)
			fmt.Fprintf(os.Stderr, "round %d: %-70s %5d removed in %s\n", r+1, tl.name, n, s.wall.Round(time.Millisecond))
		}
	}
	return samples, popN, popDur, nil
}

// populate creates and runs k exited attempts in each pod, four pods at
// a time, each with an annotation pad when it is not empty.
func (b *bench) populate(ps []*testenv.Pod, k int, pad string) (int, time.Duration, error) {
	t0 := time.Now()
	var mu sync.Mutex
	var firstErr error
	n := 0
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for _, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			for a := 0; a < k; a++ {
				spec := testenv.ContainerSpec{Name: "job", Attempt: b.attempt + uint32(a), Command: []string{"/bin/true"}, Start: true}
				if pad != "" {
					spec.ExtraAnnotations = map[string]string{"example.com/payload": pad}
				}
				id, err := b.pc.CreateContainer(b.ctx, p, spec)
				if err == nil {
					err = b.pc.WaitState(b.ctx, id, runtimeapi.ContainerState_CONTAINER_EXITED)
				}
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if err == nil {
					n++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	b.attempt += uint32(k)
	return n, time.Since(t0), firstErr
}

// exitedLeft counts the exited containers, sandbox by sandbox (lists that
// fit past the limit).
func (b *bench) exitedLeft() (int, error) {
	n := 0
	sbs, err := b.rs.ListPodSandbox(b.ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return 0, err
	}
	for _, s := range sbs.Items {
		cs, err := b.rs.ListContainers(b.ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: s.Id,
			State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_EXITED}}})
		if err != nil {
			return 0, err
		}
		n += len(cs.Containers)
	}
	return n, nil
}

// timeTool runs a tool once and times it; for gc, its JSON report gives
// the removals and their time.
func (b *bench) timeTool(tl tool) (sample, string, error) {
	cmd := tl.cmd(b.endpoint)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	t0 := time.Now()
	err := cmd.Run()
	s := sample{wall: time.Since(t0)}
	if strings.HasPrefix(tl.name, "pleg_exporter") {
		var r struct {
			Applied struct {
				Removed  map[string]int `json:"removed"`
				Removals int            `json:"removals"`
				Duration time.Duration  `json:"duration_ns"`
			} `json:"applied"`
		}
		if jerr := json.Unmarshal(out.Bytes(), &r); jerr == nil {
			s.removed, s.calls, s.callDur = r.Applied.Removed["container"], r.Applied.Removals, r.Applied.Duration
		}
	}
	msg := strings.TrimSpace(stderr.String())
	if i := strings.LastIndex(msg, "\n"); i >= 0 {
		msg = msg[i+1:]
	}
	return s, msg, err
}

var median = measure.MedianDuration

func write(samples map[string][]sample, tools []tool, n int, popDur []time.Duration, bigN int,
	crictlPast sample, crictlMsg string, crictlErr error, leftAfterCrictl int, gcPast sample, leftAfterGC int) error {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("# gc benchmark")
	p("")
	p("Generated by `make bench-gc` (internal/cmd/gcbench) on %s, %d CPUs, %s, against a private containerd (Debian's",
		time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), runtime.GOARCH)
	p("1.6) started by the program. Every figure comes from this one run. Each tool runs once per round on a fresh")
	p("population of the same shape, the order rotating round by round; each is timed as a whole process, start to")
	p("exit (gc's includes its listing, planning and the relist it makes afterwards to check), and must leave no exited")
	p("container. `--keep-per-container=0` makes gc remove every exited container, the set the crictl pipeline removes.")
	p("")
	p("## Under the limit: %d pods × %d exited attempts = %d exited containers (median of %d populations: %s to create)",
		*pods, *perPod, n, len(popDur), median(popDur).Round(time.Second))
	p("")
	p("| tool | runs | wall time, median (min–max) | containers removed per second, median |")
	p("|---|---|---|---|")
	base := 0.0
	for _, tl := range tools {
		ss := samples[tl.name]
		var ws []time.Duration
		for _, s := range ss {
			ws = append(ws, s.wall)
		}
		m := median(ws)
		sorted := append([]time.Duration(nil), ws...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
		rate := float64(n) / m.Seconds()
		if base == 0 {
			base = rate
		}
		p("| `%s` | %d | %s (%s–%s) | %.0f (%.2f× crictl) |", strings.ReplaceAll(tl.name, "|", `\|`), len(ss), m.Round(10*time.Millisecond),
			sorted[0].Round(10*time.Millisecond), sorted[len(sorted)-1].Round(10*time.Millisecond), rate, rate/base)
	}
	p("")
	p("**Load on the runtime.** gc makes one call at a time: for each container a `ContainerStatus` (is it running")
	p("now?) then the `RemoveContainer`. Its removal phase, from its own report:")
	p("")
	p("| gc run | removals | removal phase | removals per second | runtime calls per second |")
	p("|---|---|---|---|---|")
	for _, tl := range tools[1:] {
		for i, s := range samples[tl.name] {
			r := float64(s.calls) / s.callDur.Seconds()
			p("| %s, run %d | %d | %s | %.1f | %.1f |", strings.TrimPrefix(tl.name, "pleg_exporter gc --apply --keep-per-container=0 "), i+1, s.calls,
				s.callDur.Round(10*time.Millisecond), r, 2*r)
		}
	}
	p("")
	p("The crictl pipeline is not paced either: each `crictl rm` process removes its 100 ids one after another as fast")
	p("as the runtime answers, one `RemoveContainer` each.")
	p("")
	p("## Past the limit: %d exited containers with a 64 KiB annotation each (ListContainers over 16 MiB)", bigN)
	p("")
	crictlRes := "succeeded"
	if crictlErr != nil {
		crictlRes = fmt.Sprintf("failed (%v): `%s`", crictlErr, clip(crictlMsg, 200))
	}
	p("- `crictl ps -a --state exited -q | xargs -n 100 crictl rm`: %s after %s; %d exited containers left.", crictlRes,
		crictlPast.wall.Round(10*time.Millisecond), leftAfterCrictl)
	p("- `pleg_exporter gc --apply --keep-per-container=0`: removed %d in %s (%.0f per second, %d removals at the default rate, the listing past the limit included); %d exited containers left.",
		gcPast.removed, gcPast.wall.Round(10*time.Millisecond), float64(gcPast.removed)/gcPast.wall.Seconds(), gcPast.calls, leftAfterGC)
	return os.WriteFile(*outFile, []byte(b.String()), 0o644)
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
