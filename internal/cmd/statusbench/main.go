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

// Command statusbench measures what the status pass costs: the runtime calls
// and the exporter CPU of one relist at 0, 10, 100 and 1000 changed pods per
// interval, beside what the kubelet itself makes for the same pods over the
// same window.
//
// The runtime is internal/fakecri in a child process of its own (so that
// the CPU measured in this process is the exporter's alone): 1000 pods, each
// with one sandbox and three containers (one running, two exited), 3,000
// containers of ~1.8 KB. Before every measured relist the child changes the
// state of one container in each of the next N pods. Two exporters relist
// it in turn after each change, the same code the daemon runs (pleg.Relister
// over cri.Client, every feature on): one with the status pass, one without,
// so both see the same N changed pods and the difference is the pass.
//
// The kubelet relists every second and inspects a changed pod once per
// change, in the relist after it, with GetPodStatus: a ListPodSandbox and a
// ListContainers filtered by the pod's uid, then a PodSandboxStatus per
// sandbox and a ContainerStatus per container, 2 + sandboxes + containers
// calls. A pod that changes once per --relist.interval costs the kubelet
// that once in the interval; the exporter, which inspects the pods changed
// since its previous relist, must make no more.
//
//	go run ./internal/cmd/statusbench --relists 5
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/internal/fakecri"
	"github.com/pleg-exporter/pleg_exporter/internal/measure"
	"github.com/pleg-exporter/pleg_exporter/pleg"
	"github.com/pleg-exporter/pleg_exporter/runtime/cri"
)

var (
	serve   = flag.String("serve", "", "internal: be the runtime on this socket, controlled on SOCKET.ctl")
	pods    = flag.Int("pods", 1000, "pods of the population (one sandbox and three containers each)")
	padding = flag.Int("padding", 1000, "annotation bytes added to each container")
	relists = flag.Int("relists", 5, "measured relists per changed-pod count and exporter")
	counts  = flag.String("changed", "0,10,100,1000", "changed pods per interval to measure")
	profile = flag.String("cpuprofile", "", "write a CPU profile of the exporters' relists (this process) to this file")
)

var methods = []string{"ListPodSandbox", "PodSandboxStatus", "ListContainers", "ContainerStatus"}

func main() {
	flag.Parse()
	if *serve != "" {
		check(runtimeProcess(*serve))
		return
	}
	check(bench())
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "statusbench:", err)
		os.Exit(1)
	}
}

// runtimeProcess is the child: the fake runtime, and a control endpoint
// that changes pods and reports the calls received.
func runtimeProcess(sock string) error {
	srv, err := fakecri.Start(sock, fakecri.Options{MaxSendBytes: 1 << 30})
	if err != nil {
		return err
	}
	defer srv.Stop()
	sbs, cts := fakecri.Generate(fakecri.Spec{Ready: *pods, Running: *pods, Exited: 2 * *pods, PaddingBytes: *padding})
	srv.SetPopulation(sbs, cts)
	// Per pod: its sandboxes and containers (the kubelet's calls for it).
	perPod := map[string]int{}
	for _, c := range cts {
		perPod[c.PodSandboxId]++
	}
	next := 0
	var mu sync.Mutex
	mux := http.NewServeMux()
	// /churn?n=N changes one container of each of the next N pods: the
	// running container i of pod i exits, or runs again. The answer is
	// what the kubelet's GetPodStatus of those pods costs in calls.
	mux.HandleFunc("/churn", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		sbs, cts := srv.Population()
		kubelet := 0
		for k := 0; k < n; k++ {
			i := next % *pods
			next++
			c := proto.Clone(cts[i]).(*runtimeapi.Container)
			if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				c.State = runtimeapi.ContainerState_CONTAINER_EXITED
			} else {
				c.State = runtimeapi.ContainerState_CONTAINER_RUNNING
			}
			cts[i] = c
			kubelet += 2 + 1 + perPod[c.PodSandboxId] // lists, the sandbox, the containers
		}
		srv.SetPopulation(sbs, cts)
		fmt.Fprint(w, kubelet)
	})
	mux.HandleFunc("/calls", func(w http.ResponseWriter, r *http.Request) {
		m := map[string]int64{}
		for _, name := range methods {
			m[name] = srv.Calls(name)
		}
		json.NewEncoder(w).Encode(m)
	})
	os.Remove(sock + ".ctl")
	l, err := net.Listen("unix", sock+".ctl")
	if err != nil {
		return err
	}
	go http.Serve(l, mux)
	// Until the parent goes.
	io.Copy(io.Discard, os.Stdin)
	return nil
}

type ctl struct{ c *http.Client }

func (c ctl) get(path string) ([]byte, error) {
	resp, err := c.c.Get("http://runtime" + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

func (c ctl) churn(n int) int {
	b, err := c.get(fmt.Sprintf("/churn?n=%d", n))
	check(err)
	k, err := strconv.Atoi(string(b))
	check(err)
	return k
}

func (c ctl) calls() map[string]int64 {
	b, err := c.get("/calls")
	check(err)
	m := map[string]int64{}
	check(json.Unmarshal(b, &m))
	return m
}

// exporter is one relister over its own client.
type exporter struct {
	name string
	r    *pleg.Relister
	// per changed-pod count: runtime calls by RPC and CPU per relist
	samples map[int][]sample
}

type sample struct {
	calls    map[string]int64
	cpu      time.Duration
	list     time.Duration // pleg_relist_last_duration_seconds: the two lists
	statusMs float64       // the pass's own duration
}

func bench() error {
	dir, err := os.MkdirTemp("", "statusbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "cri.sock")
	self, err := os.Executable()
	if err != nil {
		return err
	}
	child := exec.Command(self, "--serve", sock, "--pods", strconv.Itoa(*pods), "--padding", strconv.Itoa(*padding))
	child.Stderr = os.Stderr
	stdin, err := child.StdinPipe()
	if err != nil {
		return err
	}
	if err := child.Start(); err != nil {
		return err
	}
	defer func() { stdin.Close(); child.Wait() }()
	c := ctl{&http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock+".ctl")
	}}}}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := c.get("/calls"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the runtime process never answered")
		}
	}

	exps, closeAll, err := newExporters(sock)
	if err != nil {
		return err
	}
	defer closeAll()
	ctx := context.Background()
	// Warm up: the first complete relist has nothing to compare with.
	for i := 0; i < 3; i++ {
		for _, e := range exps {
			e.r.RelistOnce(ctx)
		}
	}
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var ns []int
	for _, f := range strings.Split(*counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return err
		}
		ns = append(ns, n)
	}
	kubelet := map[int][]int{}
	for _, n := range ns {
		fmt.Fprintf(os.Stderr, "statusbench: %d changed pods per interval\n", n)
		for i := 0; i < *relists; i++ {
			kubelet[n] = append(kubelet[n], c.churn(n))
			for _, e := range exps {
				e.samples[n] = append(e.samples[n], e.measure(ctx, c))
			}
		}
	}
	report(ns, exps, kubelet)
	return nil
}

// newExporters makes the two relisters compared, with the status pass on
// and off, on the runtime at sock.
func newExporters(sock string) ([]*exporter, func(), error) {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	var exps []*exporter
	var clients []*cri.Client
	closeAll := func() {
		for _, c := range clients {
			c.Close()
		}
	}
	for _, status := range []bool{true, false} {
		client, err := cri.New(cri.Config{Endpoint: "unix://" + sock, MaxRecvBytes: 256 << 20, Timeout: 2 * time.Minute,
			NamespacesTop: 20, ProbeMax: 10, ProbeTimeout: 5 * time.Second})
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		clients = append(clients, client)
		r := pleg.NewRelister(client, pleg.Config{Interval: time.Second, LimitBytes: 16 << 20, Probes: true,
			Status: status, StatusStartupPods: 0, StatusStartupTimeout: 5 * time.Second, StatusMaxDuration: 3 * time.Minute,
			TuneMemory: true}, nil, logger)
		name := "status pass on"
		if !status {
			name = "status pass off"
		}
		exps = append(exps, &exporter{name: name, r: r, samples: map[int][]sample{}})
	}
	return exps, closeAll, nil
}

// measure makes one relist and counts its runtime calls, its CPU and its
// durations.
func (e *exporter) measure(ctx context.Context, c ctl) sample {
	before := c.calls()
	cpu0 := cpuTime()
	e.r.RelistOnce(ctx)
	cpu := cpuTime() - cpu0
	after := c.calls()
	s := sample{calls: map[string]int64{}, cpu: cpu}
	for _, m := range methods {
		s.calls[m] = after[m] - before[m]
	}
	st := e.r.State()
	if st.Last != nil {
		s.list = st.Last.Duration
	}
	s.statusMs = float64(st.Status.Last.Duration) / 1e6
	return s
}

func report(ns []int, exps []*exporter, kubelet map[int][]int) {
	on, off := exps[0], exps[1]
	fmt.Printf("Medians of %d relists each, the two exporters alternating after each change.\n\n", *relists)
	fmt.Println("| changed pods per interval | exporter's status calls per interval | kubelet's GetPodStatus calls, same pods, same window | exporter / kubelet | PodSandboxStatus + ContainerStatus | filtered lists | status pass wall time | exporter CPU per relist, pass on | pass off | the pass's CPU | list part (pleg_relist_last_duration_seconds), on / off |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, n := range ns {
		var status, statusCalls, lists, k, cpuOn, cpuOff, wall, listOn, listOff []float64
		for i, s := range on.samples[n] {
			// The relist's own two unfiltered lists are not the pass's.
			l := float64(s.calls["ListPodSandbox"] + s.calls["ListContainers"] - 2)
			sc := float64(s.calls["PodSandboxStatus"] + s.calls["ContainerStatus"])
			status, statusCalls, lists = append(status, l+sc), append(statusCalls, sc), append(lists, l)
			k = append(k, float64(kubelet[n][i]))
			cpuOn = append(cpuOn, s.cpu.Seconds()*1e3)
			wall = append(wall, s.statusMs)
			listOn = append(listOn, s.list.Seconds()*1e3)
		}
		for _, s := range off.samples[n] {
			cpuOff = append(cpuOff, s.cpu.Seconds()*1e3)
			listOff = append(listOff, s.list.Seconds()*1e3)
			if extra := s.calls["PodSandboxStatus"] + s.calls["ContainerStatus"] + s.calls["ListPodSandbox"] + s.calls["ListContainers"] - 2; extra != 0 {
				fmt.Fprintf(os.Stderr, "statusbench: the exporter without the pass made %d calls besides its lists\n", extra)
			}
		}
		ratio := "—"
		if median(k) > 0 {
			ratio = fmt.Sprintf("%.2f", median(status)/median(k))
		}
		fmt.Printf("| %d | %.0f | %.0f | %s | %.0f | %.0f | %.1f ms | %.1f ms | %.1f ms | %.1f ms | %.1f / %.1f ms |\n",
			n, median(status), median(k), ratio, median(statusCalls), median(lists), median(wall),
			median(cpuOn), median(cpuOff), median(cpuOn)-median(cpuOff), median(listOn), median(listOff))
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var median = measure.Median
