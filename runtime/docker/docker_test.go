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
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

func fixture(t testing.TB) []Summary {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "docker", "containers.json"))
	if err != nil {
		t.Fatal(err)
	}
	var list []Summary
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatal(err)
	}
	return list
}

func TestSummarizeFixture(t *testing.T) {
	v := Summarize(fixture(t))
	wantDocker := map[string]int{"created": 1, "running": 3, "paused": 1, "restarting": 1, "removing": 1, "exited": 6, "dead": 2}
	for k, n := range wantDocker {
		if v.Docker[k] != n {
			t.Errorf("docker[%s] = %d, want %d", k, v.Docker[k], n)
		}
	}
	// cri-dockerd's mapping: Up… (paused too) → running; Exited → exited;
	// Created → created; Dead, Restarting, Removal In Progress, "" → unknown.
	wantCT := map[string]int{"created": 1, "running": 2, "exited": 2, "unknown": 4}
	for k, n := range wantCT {
		if v.Containers[k] != n {
			t.Errorf("containers[%s] = %d, want %d", k, v.Containers[k], n)
		}
	}
	if v.Sandboxes["ready"] != 1 || v.Sandboxes["notready"] != 2 {
		t.Errorf("sandboxes = %v", v.Sandboxes)
	}
	if v.Unconvertible != 1 {
		t.Errorf("unconvertible = %d, want 1", v.Unconvertible)
	}
}

// The estimate must equal the size of one whole ListContainersResponse built
// from the same messages.
func TestPayloadEstimateMatchesWholeResponse(t *testing.T) {
	list := fixture(t)
	var cts []*runtimeapi.Container
	var sbs []*runtimeapi.PodSandbox
	for i := range list {
		switch KindOf(&list[i]) {
		case KindContainer:
			if c, err := ToCRIContainer(&list[i]); err == nil {
				cts = append(cts, c)
			}
		case KindSandbox:
			if s, err := ToCRISandbox(&list[i]); err == nil {
				sbs = append(sbs, s)
			}
		}
	}
	v := Summarize(list)
	if want := int64(proto.Size(&runtimeapi.ListContainersResponse{Containers: cts})); v.ContainersBytes != want {
		t.Errorf("containers bytes = %d, want %d", v.ContainersBytes, want)
	}
	if want := int64(proto.Size(&runtimeapi.ListPodSandboxResponse{Items: sbs})); v.SandboxesBytes != want {
		t.Errorf("sandboxes bytes = %d, want %d", v.SandboxesBytes, want)
	}
}

func TestToCRIContainerDropsInternalLabels(t *testing.T) {
	list := fixture(t)
	c, err := ToCRIContainer(&list[3])
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{typeLabel, logPathLabel, sandboxIDLabel} {
		if _, ok := c.Labels[k]; ok {
			t.Errorf("internal label %s kept", k)
		}
	}
	if c.Annotations["io.kubernetes.container.hash"] != "5f1e3a2b" || c.Labels["io.kubernetes.container.name"] != "web" {
		t.Errorf("labels %v annotations %v", c.Labels, c.Annotations)
	}
	if c.Labels["org.opencontainers.image.source"] == "" {
		t.Error("image label dropped; cri-dockerd passes them through")
	}
	if c.PodSandboxId != list[0].ID || c.Metadata.Name != "web" || c.Metadata.Attempt != 0 || c.CreatedAt != list[3].Created*1e9 {
		t.Errorf("container = %v", c)
	}
	s, err := ToCRISandbox(&list[1])
	if err != nil {
		t.Fatal(err)
	}
	if s.Metadata.Name != "cron-29218680-tzdzg" || s.Metadata.Namespace != "batch-jobs" || s.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Errorf("sandbox = %v", s)
	}
	if _, ok := s.Labels[containerNameLabel]; ok {
		t.Error("sandbox kept io.kubernetes.container.name")
	}
}

func TestStatusMapping(t *testing.T) {
	for status, want := range map[string]runtimeapi.ContainerState{
		"Up 3 hours":                   runtimeapi.ContainerState_CONTAINER_RUNNING,
		"Up 3 hours (Paused)":          runtimeapi.ContainerState_CONTAINER_RUNNING,
		"Exited (0) 2 hours ago":       runtimeapi.ContainerState_CONTAINER_EXITED,
		"Created":                      runtimeapi.ContainerState_CONTAINER_CREATED,
		"Dead":                         runtimeapi.ContainerState_CONTAINER_UNKNOWN,
		"Restarting (1) 5 seconds ago": runtimeapi.ContainerState_CONTAINER_UNKNOWN,
		"Removal In Progress":          runtimeapi.ContainerState_CONTAINER_UNKNOWN,
		"":                             runtimeapi.ContainerState_CONTAINER_UNKNOWN,
	} {
		if got := CRIContainerState(status); got != want {
			t.Errorf("%q → %v, want %v", status, got, want)
		}
	}
}

func TestParseNames(t *testing.T) {
	md, err := ParseContainerName("/k8s_worker_cron-1_batch_uid-1_3_deadbeef")
	if err != nil || md.Name != "worker" || md.Attempt != 3 {
		t.Errorf("%v %v", md, err)
	}
	for _, bad := range []string{"", "/", "/registry", "/k8s_a_b_c", "/k8s_a_b_c_d_x", "/k8s_a_b_c_d_-1", "/k8s_a_b_c_d_99999999999"} {
		if _, err := ParseContainerName(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func FuzzParseContainerName(f *testing.F) {
	f.Add("/k8s_worker_cron-1_batch_uid-1_3")
	f.Add("k8s____")
	f.Fuzz(func(t *testing.T, name string) {
		md, err := ParseContainerName(name)
		if err == nil && !strings.HasPrefix(strings.TrimPrefix(name, "/"), "k8s_") {
			t.Errorf("%q parsed to %v", name, md)
		}
		if _, err2 := ParseSandboxName(name); (err == nil) != (err2 == nil) {
			t.Errorf("%q: container and sandbox parsers disagree", name)
		}
	})
}

func FuzzCRIContainerState(f *testing.F) {
	f.Add("Up 1 second")
	f.Add("Dead")
	f.Fuzz(func(t *testing.T, status string) {
		got := CRIContainerState(status)
		if got != runtimeapi.ContainerState_CONTAINER_UNKNOWN && !strings.HasPrefix(status, "Up") &&
			!strings.HasPrefix(status, "Exited") && !strings.HasPrefix(status, "Created") {
			t.Errorf("%q → %v", status, got)
		}
		if (CRISandboxState(status) == runtimeapi.PodSandboxState_SANDBOX_READY) != strings.HasPrefix(status, "Up") {
			t.Errorf("sandbox %q", status)
		}
	})
}

// fakeDaemon serves the fixture as the Docker API on a unix socket and
// counts requests that are not GET/HEAD.
func fakeDaemon(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "docker.sock")
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	var writes atomic.Int64
	list := fixture(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/_ping", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Api-Version", "1.43")
		w.Write([]byte("OK"))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writes.Add(1)
		}
		switch {
		case strings.HasSuffix(r.URL.Path, "/containers/json"):
			json.NewEncoder(w).Encode(list)
		case strings.HasSuffix(r.URL.Path, "/version"):
			json.NewEncoder(w).Encode(map[string]string{"Version": "20.10.24", "ApiVersion": "1.41"})
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: time.Second}
	go srv.Serve(lis)
	t.Cleanup(func() { srv.Close() })
	return "unix://" + path, &writes
}

func TestClientRelistAndReadOnly(t *testing.T) {
	host, writes := fakeDaemon(t)
	c, err := New(Config{Host: host, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	info, err := c.Info(context.Background())
	if err != nil || info.Version != "20.10.24" || info.Runtime != "docker" {
		t.Fatalf("info %+v %v", info, err)
	}
	snap := c.Relist(context.Background())
	if snap.Err != nil || !snap.Counted || snap.DockerContainers["dead"] != 2 || snap.Containers[kubecontainer.ContainerUnknown] != 4 {
		t.Fatalf("snap %+v", snap)
	}
	if !snap.RPCs[kubecontainer.RPCListContainers].Estimated {
		t.Error("Docker payload not marked estimated")
	}
	// The exporter holds the moby client behind a read-only interface; reach
	// under it, as a mistaken change could, and writes are still refused.
	raw := c.api.(*client.Client)
	err = raw.ContainerRemove(context.Background(), "d0005", container.RemoveOptions{Force: true})
	var na *ErrNotAllowed
	if !errors.As(err, &na) || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("remove: err = %v, want a read-only refusal", err)
	}
	if err := raw.ContainerStop(context.Background(), "d0005", container.StopOptions{}); err == nil {
		t.Error("stop was allowed")
	}
	if writes.Load() != 0 {
		t.Errorf("%d writing requests reached the daemon", writes.Load())
	}
}

func TestClientDaemonDown(t *testing.T) {
	c, err := New(Config{Host: "unix://" + filepath.Join(t.TempDir(), "none.sock"), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	snap := c.Relist(context.Background())
	if snap.Counted || kubecontainer.ErrorCode(snap.Err) != "Unavailable" {
		t.Errorf("code = %s, err = %v", kubecontainer.ErrorCode(snap.Err), snap.Err)
	}
}
