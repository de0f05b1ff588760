// Command goimage makes a Go builder image for the Dockerfile without a
// registry: this machine's Go toolchain, busybox as the shell, the CA bundle
// and the exporter's modules from the local module cache, imported into the
// Docker daemon of DOCKER_HOST. make go-image runs it from the repository
// root; then make image GO_IMAGE=<tag> builds offline.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/alecthomas/kingpin/v2"
	"github.com/docker/docker/client"

	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
)

func main() {
	tag := kingpin.Flag("tag", "The image's name:tag.").Required().String()
	kingpin.Parse()
	api, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		fmt.Fprintln(os.Stderr, "goimage:", err)
		os.Exit(1)
	}
	version, err := testenv.ImportGoImage(context.Background(), api, ".", *tag)
	if err != nil {
		fmt.Fprintln(os.Stderr, "goimage:", err)
		os.Exit(1)
	}
	fmt.Printf("goimage: %s is %s with the exporter's modules (GOPROXY=off)\n", *tag, version)
}
