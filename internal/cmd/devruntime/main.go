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

// Command devruntime gives make run (and the demo) a container runtime on a
// machine that has none: it starts a private containerd under a directory
// of its own, adds a small kubelet-like population, runs the given command
// with --runtime.endpoint pointing at it, and stops the runtime when the
// command ends or on Ctrl-C. It never touches a system daemon.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
)

func main() {
	dir := flag.String("dir", ".run/containerd", "directory for the private containerd's root, state and socket")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: devruntime [--dir DIR] -- command [args...]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	os.Exit(run(*dir, flag.Args()))
}

func run(dir string, args []string) int {
	abs, err := filepath.Abs(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "devruntime:", err)
		return 1
	}
	os.RemoveAll(abs) // a previous run killed with SIGKILL
	fmt.Fprintf(os.Stderr, "devruntime: no container runtime socket on this machine; starting a private containerd in %s\n", abs)
	ctd, err := testenv.StartContainerd(abs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "devruntime:", err)
		return 1
	}
	defer ctd.Stop()
	if err := populate(ctd); err != nil {
		fmt.Fprintln(os.Stderr, "devruntime: population:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "devruntime: private containerd at %s with a few pods; stop with Ctrl-C\n", ctd.Endpoint())

	cmd := exec.Command(args[0], append(args[1:], "--runtime.endpoint="+ctd.Endpoint())...)
	cmd.Stdout, cmd.Stderr, cmd.Stdin = os.Stdout, os.Stderr, os.Stdin
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "devruntime:", err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-sigs:
		cmd.Process.Signal(syscall.SIGTERM)
		<-done
	case err := <-done:
		if err != nil {
			fmt.Fprintln(os.Stderr, "devruntime:", err)
			return 1
		}
	}
	return 0
}

func populate(ctd *testenv.Containerd) error {
	cc, err := ctd.Dial(64 << 20)
	if err != nil {
		return err
	}
	defer cc.Close()
	k := &testenv.PodClient{RS: runtimeapi.NewRuntimeServiceClient(cc), LogDir: filepath.Join(ctd.Dir, "pods")}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return testenv.SmallPopulation(ctx, k)
}
