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

package docker

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
)

// startDockerd starts a private dockerd for one test, and skips the test
// where that cannot run (not root, packages missing) except in CI.
func startDockerd(t *testing.T) *testenv.Dockerd {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a private dockerd")
	}
	dir, err := os.MkdirTemp("", "pleg-docker-ro")
	if err != nil {
		t.Fatal(err)
	}
	d, err := testenv.StartDockerd(dir)
	if err != nil {
		os.RemoveAll(dir)
		if os.Getenv("CI") == "" && errors.Is(err, testenv.ErrUnavailable) {
			t.Skipf("skipping: %v", err)
		}
		t.Fatalf("dockerd did not start: %v", err)
	}
	t.Cleanup(func() { d.Stop() })
	return d
}

// A real daemon upgrades attach and exec connections: the guard must refuse
// them, and every other write, before a byte leaves the exporter, with the
// client built exactly as the exporter builds it.
func TestReadOnlyAgainstDockerd(t *testing.T) {
	d := startDockerd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The harness's own, unrestricted client makes the victim.
	resp, err := d.API.ContainerCreate(ctx, &container.Config{Image: testenv.Image},
		&container.HostConfig{NetworkMode: "none"}, nil, nil, "victim")
	if err != nil {
		t.Fatal(err)
	}
	id := resp.ID
	if err := d.API.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	before, err := d.API.ContainerInspect(ctx, id)
	if err != nil || !before.State.Running {
		t.Fatalf("victim not running: %+v %v", before.State, err)
	}

	p := startProxy(t, d.Socket)
	c, err := New(Config{Host: p.Endpoint, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The exporter's own calls go through the guard (and negotiate the API
	// version, which moby would otherwise do with a ping inside an attack).
	if _, err := c.Info(ctx); err != nil {
		t.Fatal(err)
	}
	snap := c.Relist(ctx)
	if snap.Err != nil || snap.DockerContainers["running"] != 1 {
		t.Fatalf("relist through the guard: running = %d, err = %v", snap.DockerContainers["running"], snap.Err)
	}

	tryAttacks(t, c, p, id)

	after, err := d.API.ContainerInspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !after.State.Running || after.State.StartedAt != before.State.StartedAt || after.State.Pid != before.State.Pid {
		t.Errorf("victim touched: before %+v, after %+v", before.State, after.State)
	}
	if len(after.ExecIDs) != 0 {
		t.Errorf("exec instances created: %v", after.ExecIDs)
	}
}
