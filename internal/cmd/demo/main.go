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

// Command demo runs the whole chain on this machine for a newcomer: a
// private containerd with a few pods, the exporter, Prometheus with the
// mixin's rules and Alertmanager, all on loopback, and lets them cause the
// two field failures on purpose.
//
//	demo up      start it in the background and print the URLs
//	demo stall   freeze the runtime (SIGSTOP) for 3 minutes
//	demo flood   push ListContainers past 16 MiB with padded containers
//	demo unflood remove them again
//	demo down    stop everything
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/internal/stack"
	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

type state struct {
	Supervisor   int      `json:"supervisor_pid"`
	Containerd   int      `json:"containerd_pid"`
	CRIEndpoint  string   `json:"cri_endpoint"`
	CRIDir       string   `json:"cri_dir"`
	Exporter     string   `json:"exporter"`
	Prometheus   string   `json:"prometheus"`
	Alertmanager string   `json:"alertmanager"`
	FloodedIDs   []string `json:"flooded_ids,omitempty"`
}

var (
	dir      = flag.String("dir", ".run/demo", "directory of the demo's processes and data")
	exporter = flag.String("exporter", "./pleg_exporter", "exporter binary")
	rules    = flag.String("rules", "mixin/generated", "rendered mixin rules")
	stallFor = flag.Duration("for", 3*time.Minute, "how long demo stall freezes the runtime")
)

func main() {
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: demo [flags] up|stall|flood|unflood|down")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	var err error
	switch flag.Arg(0) {
	case "up":
		err = up()
	case "supervise":
		err = supervise()
	case "stall":
		err = stall()
	case "flood":
		err = flood()
	case "unflood":
		err = unflood()
	case "down":
		err = down()
	default:
		flag.Usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func statePath() string { return filepath.Join(*dir, "state.json") }

func load() (*state, error) {
	b, err := os.ReadFile(statePath())
	if err != nil {
		return nil, errors.New("the demo is not running: start it with make demo")
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	if syscall.Kill(s.Supervisor, 0) != nil {
		os.Remove(statePath())
		return nil, errors.New("the demo is not running (stale state removed): start it with make demo")
	}
	return &s, nil
}

func save(s *state) error {
	b, _ := json.MarshalIndent(s, "", "  ")
	tmp := statePath() + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, statePath())
}

func printURLs(s *state) {
	fmt.Printf(`The demo is running (private containerd, exporter, Prometheus, Alertmanager; loopback only):

  exporter      %s/metrics
  Prometheus    %s/alerts   (rules of the mixin loaded; graph: %s/graph)
  Alertmanager  %s
  runtime       %s

  make demo-stall   freeze the runtime for 3 minutes (PLEGRelistStalled fires after ~1 minute)
  make demo-flood   push ListContainers past 16 MiB (PLEGPayloadOverLimit fires within ~30 s)
  make demo-down    stop everything
`, s.Exporter, s.Prometheus, s.Prometheus, s.Alertmanager, s.CRIEndpoint)
}

// up starts the supervisor in its own session and waits until it is ready.
func up() error {
	if s, err := load(); err == nil {
		printURLs(s)
		return nil
	}
	if err := stack.Check(); err != nil {
		return err
	}
	abs, _ := filepath.Abs(*dir)
	os.RemoveAll(abs)
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(abs, "supervisor.log"))
	if err != nil {
		return err
	}
	self, _ := os.Executable()
	cmd := exec.Command(self, "-dir", abs, "-exporter", *exporter, "-rules", *rules, "supervise")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	fmt.Println("Starting the demo stack (about 10 seconds)...")
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			b, _ := os.ReadFile(filepath.Join(abs, "supervisor.log"))
			return fmt.Errorf("the demo failed to start:\n%s", b)
		default:
		}
		if s, err := load(); err == nil {
			printURLs(s)
			return nil
		}
		time.Sleep(300 * time.Millisecond)
	}
	return errors.New("the demo did not become ready in 3 minutes; see " + filepath.Join(abs, "supervisor.log"))
}

func supervise() error {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	st, err := stack.Start(stack.Options{
		Dir: *dir, ExporterBinary: *exporter, RulesDir: *rules, Log: os.Stdout,
		Addrs: map[string]string{"pleg_exporter": "127.0.0.1:10392", "prometheus": "127.0.0.1:19090", "alertmanager": "127.0.0.1:19093"},
	})
	if err != nil {
		return err
	}
	defer st.Stop()
	cc, err := st.Containerd.Dial(64 << 20)
	if err != nil {
		return err
	}
	k := &testenv.PodClient{RS: runtimeapi.NewRuntimeServiceClient(cc), LogDir: filepath.Join(st.Containerd.Dir, "pods")}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	err = testenv.SmallPopulation(ctx, k)
	cancel()
	cc.Close()
	if err != nil {
		return err
	}
	if err := save(&state{Supervisor: os.Getpid(), Containerd: st.Containerd.Pid(), CRIEndpoint: st.Containerd.Endpoint(),
		CRIDir: st.Containerd.Dir, Exporter: st.Exporter.URL(), Prometheus: st.Prometheus.URL(), Alertmanager: st.Alertmanager.URL()}); err != nil {
		return err
	}
	<-sigs
	fmt.Println("stopping")
	syscall.Kill(st.Containerd.Pid(), syscall.SIGCONT)
	os.Remove(statePath())
	return nil
}

func stall() error {
	s, err := load()
	if err != nil {
		return err
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	if err := syscall.Kill(s.Containerd, syscall.SIGSTOP); err != nil {
		return err
	}
	defer syscall.Kill(s.Containerd, syscall.SIGCONT)
	fmt.Printf("containerd frozen (SIGSTOP) for %s, as a deadlocked runtime. Watch pleg_last_seen_seconds grow at %s/graph?g0.expr=pleg_last_seen_seconds\nand the alerts at %s/alerts and %s. Ctrl-C thaws it early.\n", *stallFor, s.Prometheus, s.Prometheus, s.Alertmanager)
	end := time.Now().Add(*stallFor)
	tick := time.NewTicker(15 * time.Second)
	defer tick.Stop()
	for time.Now().Before(end) {
		select {
		case <-sigs:
			fmt.Println("thawing early")
			return nil
		case <-tick.C:
			fmt.Printf("  frozen for %s\n", (*stallFor - time.Until(end)).Round(time.Second))
		case <-time.After(time.Until(end)):
		}
	}
	fmt.Println("containerd thawed (SIGCONT); the alerts resolve within about a minute")
	return nil
}

func kubelet(s *state) (*testenv.PodClient, func(), error) {
	ctd := &testenv.Containerd{Socket: strings.TrimPrefix(s.CRIEndpoint, "unix://"), Dir: s.CRIDir}
	cc, err := ctd.Dial(64 << 20)
	if err != nil {
		return nil, nil, err
	}
	return &testenv.PodClient{RS: runtimeapi.NewRuntimeServiceClient(cc), LogDir: filepath.Join(s.CRIDir, "pods")}, func() { cc.Close() }, nil
}

// withPods runs f with the demo's state and a CRI client of its
// containerd, five minutes at most.
func withPods(f func(ctx context.Context, s *state, k *testenv.PodClient) error) error {
	s, err := load()
	if err != nil {
		return err
	}
	k, done, err := kubelet(s)
	if err != nil {
		return err
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	return f(ctx, s, k)
}

func flood() error {
	return withPods(func(ctx context.Context, s *state, k *testenv.PodClient) error {
		fmt.Println("Creating never-started containers with 64 KiB annotations until ListContainers passes 16 MiB...")
		ids, _, err := testenv.Flood(ctx, k, kubecontainer.GRPCLimitBytes)
		s.FloodedIDs = append(s.FloodedIDs, ids...)
		if serr := save(s); serr != nil {
			return serr
		}
		if err != nil {
			return err
		}
		_, lerr := k.RS.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{}})
		fmt.Printf("Created %d containers. The kubelet's relist would now fail with:\n  %v\nWatch %s/alerts (PLEGPayloadOverLimit) and pleg_relist_payload_bytes; undo with make demo-unflood.\n", len(ids), lerr, s.Prometheus)
		return nil
	})
}

func unflood() error {
	return withPods(func(ctx context.Context, s *state, k *testenv.PodClient) error {
		for _, id := range s.FloodedIDs {
			k.RemoveContainer(ctx, id)
		}
		fmt.Printf("Removed %d containers; the payload drops below the limit at the next relist.\n", len(s.FloodedIDs))
		s.FloodedIDs = nil
		return save(s)
	})
}

func down() error {
	s, err := load()
	if err != nil {
		fmt.Println("The demo is not running.")
		return nil
	}
	syscall.Kill(s.Containerd, syscall.SIGCONT)
	if err := syscall.Kill(s.Supervisor, syscall.SIGTERM); err != nil {
		return err
	}
	for i := 0; i < 600 && syscall.Kill(s.Supervisor, 0) == nil; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	abs, _ := filepath.Abs(*dir)
	os.RemoveAll(abs)
	fmt.Println("The demo is stopped and its files removed.")
	return nil
}
