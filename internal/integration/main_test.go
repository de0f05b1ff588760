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

package integration

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/collector"
	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
	"github.com/pleg-exporter/pleg_exporter/pleg"
	"github.com/pleg-exporter/pleg_exporter/runtime/cri"
)

var (
	ctd      *testenv.Containerd
	ctdErr   error
	dockerd  *testenv.Dockerd
	dockErr  error
	kubelet  *testenv.PodClient
	workRoot string
	// containerds are the runtimes the containerd tests run on: Debian's
	// 1.6 (ctd, kubelet), the containerd 1.7 of testenv.Containerd17Dir and
	// the containerd 2.x of testenv.Containerd2Dir.
	containerds []*containerdRuntime
)

// containerdRuntime is one private containerd with the harness's own
// unrestricted client.
type containerdRuntime struct {
	name string
	// opts start it; a test that needs a containerd of its own of the
	// same version starts one with them.
	opts testenv.ContainerdOptions
	// streams: it serves the CRI list streaming RPCs (containerd 2.4).
	streams   bool
	ctd       *testenv.Containerd
	err       error
	pods      *testenv.PodClient
	populated bool
}

func startContainerd(name, dir string, opts testenv.ContainerdOptions) *containerdRuntime {
	r := &containerdRuntime{name: name, opts: opts}
	t0 := time.Now()
	r.ctd, r.err = testenv.StartContainerdWith(dir, opts)
	if r.err != nil {
		return r
	}
	cc, err := r.ctd.Dial(256 << 20)
	if err != nil {
		r.err = err
		return r
	}
	r.pods = &testenv.PodClient{RS: runtimeapi.NewRuntimeServiceClient(cc), LogDir: filepath.Join(dir, "pod-logs")}
	fmt.Printf("private containerd %s ready in %s\n", name, time.Since(t0).Round(time.Millisecond))
	return r
}

func TestMain(m *testing.M) {
	// A kubelet, its pods, mounts, cgroups and sysctls left by a killed run.
	testenv.CleanLeftoversOrExit()
	var err error
	workRoot, err = os.MkdirTemp("", "pleg-integration")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := 1
	func() {
		// Stop exactly what was started, whatever the tests did.
		defer func() {
			for _, r := range containerds {
				if r.ctd != nil {
					r.ctd.Stop()
				}
			}
			if dockerd != nil {
				dockerd.Stop()
			}
			os.RemoveAll(workRoot)
		}()
		debian := startContainerd("1.6", filepath.Join(workRoot, "containerd"), testenv.ContainerdOptions{})
		ctd, ctdErr, kubelet = debian.ctd, debian.err, debian.pods
		containerds = []*containerdRuntime{debian,
			startBuilt(testenv.Containerd17Version, "containerd17", testenv.Containerd17Dir, true),
			startBuilt(testenv.Containerd2Version, "containerd2", testenv.Containerd2Dir, false)}
		containerds[2].streams = true
		t0 := time.Now()
		dockerd, dockErr = testenv.StartDockerd(filepath.Join(workRoot, "docker"))
		if dockErr == nil {
			fmt.Printf("private dockerd ready in %s\n", time.Since(t0).Round(time.Millisecond))
			startImageBuild(filepath.Join(workRoot, "docker-image"))
			defer func() {
				image.cancel()
				<-image.done
			}()
		}
		code = m.Run()
	}()
	os.Exit(code)
}

// startBuilt starts the containerd build that dir names (make test builds
// it into .tools/), in workRoot/sub.
func startBuilt(version, sub string, dir func() (string, error), v1 bool) *containerdRuntime {
	bins, err := dir()
	if err != nil {
		return &containerdRuntime{name: version, err: err}
	}
	return startContainerd(version, filepath.Join(workRoot, sub), testenv.ContainerdOptions{Binaries: bins, V1: v1})
}

// onEachContainerd runs fn as a subtest on every private containerd.
func onEachContainerd(t *testing.T, fn func(t *testing.T, r *containerdRuntime)) {
	for _, r := range containerds {
		t.Run(r.name, func(t *testing.T) {
			need(t, r.err)
			fn(t, r)
		})
	}
}

// need skips a test when its runtime could not start here, except in CI
// where every runtime must run.
func need(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("CI") != "" || !errors.Is(err, testenv.ErrUnavailable) {
		t.Fatalf("runtime did not start: %v", err)
	}
	t.Skipf("skipping: %v", err)
}

func ctx(t *testing.T, d time.Duration) context.Context {
	c, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return c
}

// exporterFor builds the exporter's pipeline on a CRI endpoint: the same
// client, relister and collector the binary uses.
func exporterFor(t *testing.T, endpoint string, interval time.Duration) (*pleg.Relister, *prometheus.Registry, *cri.Client) {
	t.Helper()
	c, err := cri.New(cri.Config{Endpoint: endpoint, MaxRecvBytes: 256 << 20, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	metrics := collector.New(collector.Config{Threshold: 3 * time.Minute, LimitBytes: 16 << 20})
	r := pleg.NewRelister(c, pleg.Config{Interval: interval, LimitBytes: 16 << 20}, metrics, slog.New(slog.DiscardHandler))
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics)
	return r, reg, c
}

// series reads every sample of the registry as name{labels} → value.
func series(t *testing.T, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += fmt.Sprintf("{%s=%s}", l.GetName(), l.GetValue())
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[key] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}
