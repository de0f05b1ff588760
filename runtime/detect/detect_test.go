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

package detect

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pleg-exporter/pleg_exporter/internal/fakecri"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

func TestValidate(t *testing.T) {
	ok := Config{Kind: KindAuto, MaxRecvBytes: 1, Timeout: time.Second}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Kind: "podman", MaxRecvBytes: 1, Timeout: time.Second}, "must be auto, cri or docker"},
		{Config{Kind: KindCRI, MaxRecvBytes: 1, Timeout: time.Second}, "needs --runtime.endpoint"},
		{Config{Kind: KindAuto, Endpoint: "/run/containerd/containerd.sock", MaxRecvBytes: 1, Timeout: time.Second}, "no scheme"},
		{Config{Kind: KindAuto, DockerHost: "tcp://1.2.3.4:2375", MaxRecvBytes: 1, Timeout: time.Second}, "--docker.host"},
		{Config{Kind: KindAuto, Timeout: time.Second}, "max-recv-bytes"},
	} {
		err := tc.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// The exporter may start before the runtime: auto-detection keeps probing
// and picks the socket up when it appears, in candidate order.
func TestAutoDetectWaitsForSocket(t *testing.T) {
	dir := t.TempDir()
	cands := []Candidate{
		{"containerd", KindCRI, "unix://" + filepath.Join(dir, "containerd.sock")},
		{"cri-o", KindCRI, "unix://" + filepath.Join(dir, "crio.sock")},
	}
	rt, err := Open(Config{Kind: KindAuto, Candidates: cands, DockerHost: "none", MaxRecvBytes: 64 << 20, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	snap := rt.Relist(context.Background())
	if snap.Counted || kubecontainer.ErrorCode(snap.Err) != "Unavailable" || !strings.Contains(snap.Err.Error(), "no container runtime socket") {
		t.Fatalf("before: code %s err %v", kubecontainer.ErrorCode(snap.Err), snap.Err)
	}
	srv, err := fakecri.Start(filepath.Join(dir, "crio.sock"), fakecri.Options{RuntimeName: "cri-o"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	srv.SetPopulation(fakecri.Generate(fakecri.Spec{Ready: 2, Exited: 3}))
	snap = rt.Relist(context.Background())
	if snap.Err != nil || snap.Containers[kubecontainer.ContainerExited] != 3 {
		t.Fatalf("after: %v %v", snap.Err, snap.Containers)
	}
	info, err := rt.Info(context.Background())
	if err != nil || info.Runtime != "cri-o" {
		t.Errorf("info %+v %v", info, err)
	}
}

func TestExplicitDockerSocketMeansDocker(t *testing.T) {
	rt, err := Open(Config{Kind: KindAuto, Endpoint: "unix://" + filepath.Join(t.TempDir(), "docker.sock"), MaxRecvBytes: 1 << 20, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	snap := rt.Relist(context.Background())
	if !snap.RPCs[kubecontainer.RPCListContainers].Estimated {
		t.Error("docker.sock endpoint not treated as the Docker API")
	}
}

// The Docker client reads its answers under the same receive limit as the
// CRI client (--runtime.max-recv-bytes).
func TestDockerGetsTheReceiveLimit(t *testing.T) {
	if got := (Config{MaxRecvBytes: 12345}).docker("unix:///var/run/docker.sock").MaxBytes; got != 12345 {
		t.Errorf("docker MaxBytes = %d, want 12345", got)
	}
}
