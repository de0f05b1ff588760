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
