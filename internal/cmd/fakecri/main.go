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

// Command fakecri serves a generated kubelet-like population over the CRI on
// a unix socket, for benchmarks that need the runtime in another process.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/pleg-exporter/pleg_exporter/internal/fakecri"
)

func main() {
	socket := flag.String("socket", "", "unix socket path to listen on")
	n := flag.Int("containers", 10000, "containers to list")
	padding := flag.Int("padding-bytes", 1600, "extra annotation bytes per container (~2.3 KiB each in all)")
	maxSend := flag.Int("max-send-bytes", 1<<30, "send limit (containerd: 16777216)")
	flag.Parse()
	if *socket == "" {
		fmt.Fprintln(os.Stderr, "fakecri: --socket is required")
		os.Exit(2)
	}
	srv, err := fakecri.Start(*socket, fakecri.Options{MaxSendBytes: *maxSend, RuntimeName: "fakecri"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakecri:", err)
		os.Exit(1)
	}
	srv.SetPopulation(fakecri.Generate(fakecri.BenchSpec(*n, *padding)))
	fmt.Println("ready")
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	<-sigs
	srv.Stop()
}
