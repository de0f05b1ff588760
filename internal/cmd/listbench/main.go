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

// Command listbench measures the list part of the relist,
// pleg_relist_last_duration_seconds (the two unfiltered calls, nothing else), of
// two exporter binaries against one real containerd, side by side.
//
// It starts a private containerd (internal/testenv: its own directories,
// never a system daemon), fills it with never-started containers of a fixed
// size (by default 3,000 of ~1.8 KB, a 5.3 MB ListContainers answer), then
// runs the binaries in turn, A B A B ... (or A B C A B C ...), each for
// --relists relists at --relist.interval 1s, with every feature on
// (namespace metrics, status probes; the churn is always on where the binary has it). From each run it
// reads pleg_relist_last_duration_seconds after every relist (a scrape whenever
// pleg_relists_total moves) and the exporter's CPU time over the measured
// relists (/proc/PID/stat). It prints each run's median, each binary's
// median of its run medians, and its ratio to the last binary (the
// baseline) taken round by round, then the median of those ratios.
//
// With no --bin it only starts and fills the runtime and waits for Ctrl-C,
// printing the endpoint (for go test -bench against the real socket, see
// runtime/cri/relist_bench_test.go: CRI_BENCH_ENDPOINT).
//
//	go run ./internal/cmd/listbench --bin today=./new --bin before=./old --rounds 3 --relists 30
//
// Root only (containerd). make bench-relist builds the binaries and runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/internal/measure"
	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
)

var (
	bins       binList
	endpoint   = flag.String("endpoint", "", "use this CRI endpoint instead of starting and filling a private containerd")
	dir        = flag.String("dir", "", "directory of the private containerd (default: a temp dir)")
	containers = flag.Int("containers", 3000, "containers to create")
	pods       = flag.Int("pods", 30, "pods (ready sandboxes) to spread them over")
	padding    = flag.Int("padding", 1050, "bytes of one extra annotation on each container")
	rounds     = flag.Int("rounds", 3, "A B pairs, alternated")
	relists    = flag.Int("relists", 30, "relists measured per run")
	warmup     = flag.Int("warmup", 5, "relists discarded at the start of each run (more than the status pass's start-up inspections take: 10 pods a relist)")
	interval   = flag.String("interval", "1s", "--relist.interval of the exporters")
	dump       = flag.String("dump", "", "write the two unfiltered answers to DIR/sandboxes.pb and DIR/containers.pb (for CRI_BENCH_ANSWERS)")
	extra      = flag.String("args", "--collector.namespaces --probe.max-per-cycle=10 --web.disable-exporter-metrics --log.level=warn",
		"flags given to both exporters besides the endpoint, listen address and interval")
)

// binList is the repeated --bin NAME=PATH flag.
type binList []struct{ name, path string }

func (b *binList) String() string { return fmt.Sprint(*b) }

func (b *binList) Set(v string) error {
	name, path, ok := strings.Cut(v, "=")
	if !ok {
		name, path = v, v
	}
	*b = append(*b, struct{ name, path string }{name, path})
	return nil
}

func main() {
	flag.Var(&bins, "bin", "NAME=PATH of an exporter binary, repeated: they run in turn, each round in this order; ratios are to the last one (the baseline)")
	flag.Parse()
	testenv.CleanLeftoversOrExit()
	ep := *endpoint
	if ep == "" {
		d := *dir
		if d == "" {
			var err error
			d, err = os.MkdirTemp("", "listbench")
			check(err)
		}
		ctd, err := testenv.StartContainerd(d)
		check(err)
		ctd.SkipPodRemoval = true // thousands of containers: kill, do not remove one by one
		defer ctd.Stop()
		stopOnSignal(ctd)
		t0 := time.Now()
		check(populate(ctd, d))
		logf("filled %d containers in %d pods in %s", *containers, *pods, time.Since(t0).Round(time.Second))
		ep = ctd.Endpoint()
	}
	sizes(ep)
	if len(bins) == 0 {
		logf("runtime at %s; Ctrl-C stops it", ep)
		select {}
	}
	check(compare(ep))
}

var stopping sync.Mutex

func stopOnSignal(ctd *testenv.Containerd) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		stopping.Lock() // no exit half way through a run's cleanup
		ctd.Stop()
		os.Exit(1)
	}()
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "listbench: "+format+"\n", args...)
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "listbench:", err)
		os.Exit(1)
	}
}

// populate makes the pods, then the containers, eight at a time, never
// started (no shim, no process: only the runtime's records), with unique
// names and a padding annotation.
func populate(ctd *testenv.Containerd, d string) error {
	cc, err := ctd.Dial(256 << 20)
	if err != nil {
		return err
	}
	defer cc.Close()
	pc := &testenv.PodClient{RS: runtimeapi.NewRuntimeServiceClient(cc), LogDir: filepath.Join(d, "pod-logs")}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	namespaces := []string{"default", "kube-system", "batch-jobs"}
	var ps []*testenv.Pod
	for i := 0; i < *pods; i++ {
		p, err := pc.RunPod(ctx, namespaces[i%len(namespaces)], fmt.Sprintf("worker-%d", i))
		if err != nil {
			return err
		}
		ps = append(ps, p)
	}
	ann := map[string]string{"example.com/payload": strings.Repeat("p", *padding)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < *containers; i += 8 {
				spec := testenv.ContainerSpec{Name: fmt.Sprintf("job-%d", i), ExtraAnnotations: ann}
				if _, err := pc.CreateContainer(ctx, ps[i%len(ps)], spec); err != nil {
					mu.Lock()
					first = err
					mu.Unlock()
					return
				}
				if i%500 == 0 {
					logf("%d containers", i)
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// sizes prints the two unfiltered answers' sizes, as a client receives them.
func sizes(ep string) {
	path := strings.TrimPrefix(ep, "unix://")
	cc, err := (&testenv.Containerd{Socket: path}).Dial(1 << 30)
	check(err)
	defer cc.Close()
	rs := runtimeapi.NewRuntimeServiceClient(cc)
	ctx := context.Background()
	sb, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	check(err)
	ct, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{}})
	check(err)
	if *dump != "" {
		check(os.MkdirAll(*dump, 0o755))
		for name, m := range map[string]proto.Message{"sandboxes.pb": sb, "containers.pb": ct} {
			b, err := proto.Marshal(m)
			check(err)
			check(os.WriteFile(filepath.Join(*dump, name), b, 0o644))
		}
	}
	n := len(ct.GetContainers())
	size := proto.Size(ct)
	logf("ListPodSandbox: %d sandboxes, %d bytes; ListContainers: %d containers, %d bytes (%.2f MB, %d bytes each)",
		len(sb.GetItems()), proto.Size(sb), n, size, float64(size)/1e6, size/max(n, 1))
}

// run is one exporter process's measured relists.
type run struct {
	bin       string
	durations []float64 // seconds, one per relist
	cpu       float64   // exporter CPU seconds over the measured relists
}

func (r run) median() float64 { return median(r.durations) }

func (r run) cpuPerRelist() float64 { return r.cpu / float64(len(r.durations)) }

func compare(ep string) error {
	runs := make([][]run, len(bins)) // per binary, per round
	for i := 0; i < *rounds; i++ {
		for k, b := range bins {
			r, err := measureRun(ep, b.path)
			if err != nil {
				return fmt.Errorf("%s: %w", b.name, err)
			}
			logf("round %d %s: median %.2f ms over %d relists, %.2f ms CPU per relist", i+1, b.name,
				1e3*r.median(), len(r.durations), 1e3*r.cpuPerRelist())
			runs[k] = append(runs[k], r)
		}
	}
	base := len(bins) - 1
	fmt.Printf("pleg_relist_last_duration_seconds, median of each run's %d relists (ms):\n\n| round |", *relists)
	for _, b := range bins {
		fmt.Printf(" %s |", b.name)
	}
	fmt.Printf("\n|---:|%s\n", strings.Repeat("---:|", len(bins)))
	for i := 0; i < *rounds; i++ {
		fmt.Printf("| %d |", i+1)
		for k := range bins {
			fmt.Printf(" %.2f |", 1e3*runs[k][i].median())
		}
		fmt.Println()
	}
	fmt.Printf("\n| binary | list part: median of the run medians | ratio to %s (median of the rounds' ratios) | exporter CPU per relist | CPU ratio |\n|---|---:|---:|---:|---:|\n", bins[base].name)
	for k, b := range bins {
		var meds, ratios, cpus, cpuRatios []float64
		for i := 0; i < *rounds; i++ {
			meds = append(meds, runs[k][i].median())
			ratios = append(ratios, runs[k][i].median()/runs[base][i].median())
			cpus = append(cpus, runs[k][i].cpuPerRelist())
			cpuRatios = append(cpuRatios, runs[k][i].cpuPerRelist()/runs[base][i].cpuPerRelist())
		}
		fmt.Printf("| %s | %.2f ms | %.3f | %.2f ms | %.3f |\n", b.name, 1e3*median(meds), median(ratios), 1e3*median(cpus), median(cpuRatios))
	}
	return nil
}

// measureRun starts bin against ep and reads the duration of every relist
// after the warm-up until it has *relists of them.
func measureRun(ep, bin string) (run, error) {
	stopping.Lock()
	defer stopping.Unlock()
	addr, err := freeAddr()
	if err != nil {
		return run{}, err
	}
	args := append([]string{"--runtime=cri", "--runtime.endpoint=" + ep, "--web.listen-address=" + addr,
		"--relist.interval=" + *interval}, strings.Fields(*extra)...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return run{}, err
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	url := "http://" + addr + "/metrics"
	r := run{bin: bin}
	last := -1.0
	var cpu0 float64
	deadline := time.Now().Add(time.Duration(*relists+*warmup+10) * 5 * time.Second)
	for len(r.durations) < *relists {
		if time.Now().After(deadline) {
			return r, fmt.Errorf("only %d relists measured before the deadline", len(r.durations))
		}
		time.Sleep(100 * time.Millisecond)
		ms, err := testenv.ScrapeMetrics(url)
		if err != nil {
			continue // not listening yet
		}
		total, ok := testenv.Gauge(ms, "pleg_relists_total", nil)
		if !ok || total == last {
			continue
		}
		d, ok := testenv.Gauge(ms, "pleg_relist_last_duration_seconds", nil)
		if !ok {
			continue // no relist finished yet
		}
		if mf := ms["pleg_relist_errors_total"]; mf != nil {
			for _, m := range mf.GetMetric() {
				if v := m.GetCounter().GetValue(); v > 0 {
					return r, fmt.Errorf("%v relists failed: %v", v, m.GetLabel())
				}
			}
		}
		if last >= 0 && total != last+1 {
			logf("missed a relist (%v to %v): scrapes too slow", last, total)
		}
		last = total
		switch {
		case int(total) == *warmup:
			cpu0 = cpuSeconds(cmd.Process.Pid)
		case int(total) > *warmup:
			r.durations = append(r.durations, d)
		}
	}
	r.cpu = cpuSeconds(cmd.Process.Pid) - cpu0
	return r, nil
}

// cpuSeconds is the user + system time of a process so far.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// fields after the command: state(0) ... utime(11) stime(12)
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

var freeAddr = measure.FreeAddr

var median = measure.Median
