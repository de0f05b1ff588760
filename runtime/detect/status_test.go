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
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pleg-exporter/pleg_exporter/internal/fakecri"
	"github.com/pleg-exporter/pleg_exporter/runtime/cri"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// fakeDocker is a Docker API with no containers that records the paths
// asked of it.
type fakeDocker struct {
	mu    sync.Mutex
	paths []string
}

func (f *fakeDocker) asked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.paths...)
}

func startFakeDocker(t *testing.T, path string) *fakeDocker {
	t.Helper()
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeDocker{}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.paths = append(f.paths, r.URL.Path+"?"+r.URL.RawQuery)
		f.mu.Unlock()
		switch {
		case r.URL.Path == "/_ping":
			w.Header().Set("Api-Version", "1.43")
			w.Write([]byte("OK"))
		case strings.HasSuffix(r.URL.Path, "/containers/json"):
			w.Write([]byte("[]"))
		default:
			http.Error(w, `{"message":"page not found"}`, http.StatusNotFound)
		}
	})}
	go srv.Serve(lis)
	t.Cleanup(func() { srv.Close() })
	return f
}

func inspector(t *testing.T, rt kubecontainer.Runtime) kubecontainer.PodInspector {
	t.Helper()
	pi, ok := rt.(kubecontainer.PodInspector)
	if !ok {
		t.Fatalf("%T is not a PodInspector", rt)
	}
	return pi
}

// Before any socket appears the inspection fails as the relist does.
func TestInspectPodBeforeTheRuntime(t *testing.T) {
	rt, err := Open(Config{Kind: KindAuto, Candidates: []Candidate{{"containerd", KindCRI, "unix://" + filepath.Join(t.TempDir(), "none.sock")}},
		DockerHost: "none", MaxRecvBytes: 1 << 20, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ins := inspector(t, rt).InspectPod(context.Background(), "uid-1", kubecontainer.CallTracker{})
	if code := kubecontainer.ErrorCode(ins.Err); code != "Unavailable" || len(ins.Calls) != 0 || ins.UID != "uid-1" {
		t.Errorf("code %q calls %d uid %q: %v", code, len(ins.Calls), ins.UID, ins.Err)
	}
}

// On a node whose kubelet talks to Docker itself, the Docker client answers.
func TestInspectPodThroughDocker(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "docker.sock")
	d := startFakeDocker(t, sock)
	rt, err := Open(Config{Kind: KindAuto, Candidates: []Candidate{{"docker", KindDocker, "unix://" + sock}},
		MaxRecvBytes: 1 << 20, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ins := inspector(t, rt).InspectPod(context.Background(), "uid-1", kubecontainer.CallTracker{})
	if ins.Err != nil || len(ins.Calls) != 2 || ins.Calls[0].RPC != kubecontainer.RPCListPodSandbox {
		t.Fatalf("err %v calls %+v", ins.Err, ins.Calls)
	}
	lists := 0
	for _, p := range d.asked() {
		if strings.Contains(p, "/containers/json") && strings.Contains(p, "io.kubernetes.pod.uid%3Duid-1") {
			lists++
		}
	}
	if lists != 2 {
		t.Errorf("the Docker daemon was asked %v", d.asked())
	}
}

// On a cri-dockerd node the CRI client answers, the kubelet's way through
// cri-dockerd; the Docker daemon beside it is not asked.
func TestInspectPodOnCRIDockerdGoesThroughTheCRI(t *testing.T) {
	dir := t.TempDir()
	d := startFakeDocker(t, filepath.Join(dir, "docker.sock"))
	srv, err := fakecri.Start(filepath.Join(dir, "cri-dockerd.sock"), fakecri.Options{RuntimeName: "docker", RejectUnknownFilter: true})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	srv.SetPopulation(fakecri.Generate(fakecri.Spec{Ready: 1}))
	rt, err := Open(Config{Kind: KindAuto, Candidates: []Candidate{{"cri-dockerd", KindCRI, "unix://" + filepath.Join(dir, "cri-dockerd.sock")}},
		DockerHost: "unix://" + filepath.Join(dir, "docker.sock"), MaxRecvBytes: 1 << 20, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if snap := rt.Relist(context.Background()); snap.Err != nil || snap.DockerErr != nil {
		t.Fatalf("relist: %v, docker view: %v", snap.Err, snap.DockerErr)
	}
	before := len(d.asked())
	if before == 0 {
		t.Fatal("the relist read no Docker view: not the cri-dockerd wrapper")
	}
	ins := inspector(t, rt).InspectPod(context.Background(), "uid-1", kubecontainer.CallTracker{})
	if n := len(d.asked()); n != before {
		t.Errorf("the Docker daemon was asked %v during the inspection", d.asked()[before:])
	}
	var c *cri.Client
	if _, ok := any(c).(kubecontainer.PodInspector); ok {
		if len(ins.Calls) == 0 || ins.Calls[0].RPC != kubecontainer.RPCListPodSandbox {
			t.Errorf("the CRI client made no inspection: %v, %+v", ins.Err, ins.Calls)
		}
	} else if code := kubecontainer.ErrorCode(ins.Err); code != "Unimplemented" || len(ins.Calls) != 0 {
		t.Errorf("code %q calls %d: %v", code, len(ins.Calls), ins.Err)
	}
}

// A wrapper passes the call to the runtime under it, tracker and all.
func TestInspectPodPassesThrough(t *testing.T) {
	inner := &stubInspector{}
	w := &withDocker{Runtime: inner}
	begun := 0
	ins := w.InspectPod(context.Background(), "uid-9", kubecontainer.CallTracker{Begin: func(string, string) { begun++ }})
	if ins.UID != "uid-9" || inner.uid != "uid-9" || begun != 1 {
		t.Errorf("inspection %+v, inner asked %q, tracker begun %d", ins, inner.uid, begun)
	}
	plain := &withDocker{Runtime: plainRuntime{}}
	if code := kubecontainer.ErrorCode(plain.InspectPod(context.Background(), "u", kubecontainer.CallTracker{}).Err); code != "Unimplemented" {
		t.Errorf("a runtime without the status pass: code %q", code)
	}
}

type plainRuntime struct{}

func (plainRuntime) Relist(context.Context) *kubecontainer.Snapshot {
	return kubecontainer.NewSnapshot(time.Now())
}
func (plainRuntime) Inventory(context.Context) (*kubecontainer.Inventory, error) {
	return &kubecontainer.Inventory{}, nil
}
func (plainRuntime) Info(context.Context) (kubecontainer.Info, error) {
	return kubecontainer.Info{}, nil
}
func (plainRuntime) Close() error { return nil }

type stubInspector struct {
	plainRuntime
	uid string
}

func (s *stubInspector) InspectPod(_ context.Context, uid string, track kubecontainer.CallTracker) kubecontainer.PodInspection {
	s.uid = uid
	track.Begin(kubecontainer.RPCListPodSandbox, "")
	return kubecontainer.PodInspection{UID: uid}
}
