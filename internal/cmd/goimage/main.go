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
