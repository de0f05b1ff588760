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
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// synthWant is what a synthetic population must count to.
type synthWant struct {
	docker, containers, sandboxes map[string]int
	unconvertible                 int
}

// synthContainers builds n containers as Docker lists them on a cri-dockerd
// node, every field of the answer filled as a real daemon fills it (ports,
// mounts, networks: the bulk the decoder skips), and what they count to by
// cri-dockerd's rules.
func synthContainers(n int) ([]byte, synthWant) {
	want := synthWant{docker: map[string]int{}, containers: map[string]int{}, sandboxes: map[string]int{}}
	// Docker state, status, and the CRI state cri-dockerd maps the status to.
	states := [][3]string{
		{"running", "Up 3 hours", "running"},
		{"exited", "Exited (0) 2 hours ago", "exited"},
		{"created", "Created", "created"},
		{"dead", "Dead", "unknown"},
		{"restarting", "Restarting (1) 5 seconds ago", "unknown"},
		{"paused", "Up 3 hours (Paused)", "running"},
	}
	list := make([]container.Summary, n)
	for i := range list {
		pod, ns, uid := fmt.Sprintf("web-%d", i/5), fmt.Sprintf("team-%d", i%7), fmt.Sprintf("0f3c1a2b-%04d-4a4a-8b8b-%012d", i%10000, i/5)
		st := states[i%len(states)]
		labels := map[string]string{
			"io.kubernetes.pod.name": pod, "io.kubernetes.pod.namespace": ns, "io.kubernetes.pod.uid": uid,
			"annotation.kubernetes.io/config.seen": "2026-11-30T10:00:00.000000000Z", "annotation.kubernetes.io/config.source": "api",
			"app.kubernetes.io/name": "web", "pod-template-hash": "7d9f8c6b5",
		}
		name := ""
		switch {
		case i%97 == 0: // a plain Docker container, invisible to the kubelet
			labels = map[string]string{"org.opencontainers.image.source": "https://example.com/registry"}
			name = fmt.Sprintf("/registry-%d", i)
		case i%5 == 0:
			labels["io.kubernetes.docker.type"] = "podsandbox"
			labels["io.kubernetes.container.name"] = "POD"
			name = fmt.Sprintf("/k8s_POD_%s_%s_%s_0", pod, ns, uid)
			sb := "notready"
			if strings.HasPrefix(st[1], "Up") {
				sb = "ready"
			}
			want.sandboxes[sb]++
		default:
			labels["io.kubernetes.docker.type"] = "container"
			labels["io.kubernetes.container.name"] = "app"
			labels["io.kubernetes.sandbox.id"] = fmt.Sprintf("%064x", i/5*5)
			labels["io.kubernetes.container.logpath"] = "/var/log/pods/" + ns + "_" + pod + "_" + uid + "/app/0.log"
			labels["annotation.io.kubernetes.container.hash"] = "5f1e3a2b"
			labels["annotation.io.kubernetes.container.restartCount"] = strconv.Itoa(i % 3)
			labels["annotation.io.kubernetes.container.terminationMessagePath"] = "/dev/termination-log"
			labels["annotation.io.kubernetes.container.terminationMessagePolicy"] = "File"
			name = fmt.Sprintf("/k8s_app_%s_%s_%s_%d", pod, ns, uid, i%3)
			if i%101 == 0 {
				name = fmt.Sprintf("/k8s_app_%s_%s", pod, ns) // cri-dockerd cannot parse it
				want.unconvertible++
			} else {
				want.containers[st[2]]++
			}
		}
		want.docker[st[0]]++
		list[i] = container.Summary{
			ID: fmt.Sprintf("%064x", i), Names: []string{name},
			Image: "registry.example.com/team/web:1.2.3", ImageID: "sha256:" + strings.Repeat("ab", 32),
			Command: "/bin/web --listen=:8080", Created: 1764500000 + int64(i),
			Ports: []container.Port{{PrivatePort: 8080, Type: "tcp"}}, Labels: labels,
			State: container.ContainerState(st[0]), Status: st[1],
			HostConfig: struct {
				NetworkMode string            `json:",omitempty"`
				Annotations map[string]string `json:",omitempty"`
			}{NetworkMode: "container:" + fmt.Sprintf("%064x", i/5*5)},
			NetworkSettings: &container.NetworkSettingsSummary{Networks: map[string]*network.EndpointSettings{}},
			Mounts: []container.MountPoint{
				{Type: "bind", Source: "/var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~projected/kube-api-access", Destination: "/var/run/secrets/kubernetes.io/serviceaccount", Mode: "ro", RW: false, Propagation: "rprivate"},
				{Type: "bind", Source: "/var/lib/kubelet/pods/" + uid + "/etc-hosts", Destination: "/etc/hosts", RW: true, Propagation: "rprivate"},
				{Type: "bind", Source: "/var/lib/kubelet/pods/" + uid + "/containers/app/0", Destination: "/dev/termination-log", RW: true, Propagation: "rprivate"},
			},
		}
	}
	body, err := json.Marshal(list)
	if err != nil {
		panic(err)
	}
	return body, want
}

// serveList serves body as GET /containers/json on a unix socket, in
// chunks as dockerd streams it, or with a Content-Length. The answer is
// served from a file, so that it is not on the heap the benchmark measures.
func serveList(t testing.TB, body []byte, withLength bool) string {
	t.Helper()
	return serveListCounting(t, body, withLength, nil)
}

// serveListCounting is serveList that counts the version pings in pings.
func serveListCounting(t testing.TB, body []byte, withLength bool, pings *atomic.Int64) string {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "containers.json")
	if err := os.WriteFile(file, body, 0o600); err != nil {
		t.Fatal(err)
	}
	size := strconv.Itoa(len(body)) // not body: the handler must not keep it
	lis, err := net.Listen("unix", filepath.Join(dir, "docker.sock"))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/_ping", func(w http.ResponseWriter, _ *http.Request) {
		if pings != nil {
			pings.Add(1)
		}
		w.Header().Set("Api-Version", "1.41")
		w.Write([]byte("OK"))
	})
	mux.HandleFunc("/v1.41/version", func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"Version": "20.10.24", "ApiVersion": "1.41"})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/containers/json") || r.URL.Query().Get("all") != "1" {
			http.Error(w, `{"message":"page not found"}`, http.StatusNotFound)
			return
		}
		f, err := os.Open(file)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer f.Close()
		w.Header().Set("Content-Type", "application/json")
		if withLength {
			w.Header().Set("Content-Length", size)
		}
		io.CopyBuffer(struct{ io.Writer }{w}, f, make([]byte, 32<<10)) // until done or the client stops reading
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(lis)
	t.Cleanup(func() { srv.Close() })
	return "unix://" + filepath.Join(dir, "docker.sock")
}

func TestListStreamsExactCounts(t *testing.T) {
	body, want := synthContainers(3000)
	c, err := New(Config{Host: serveList(t, body, false), Timeout: time.Minute, MaxBytes: int64(len(body))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	snap := c.Relist(context.Background())
	if snap.Err != nil || !snap.Counted {
		t.Fatalf("relist: %v", snap.Err)
	}
	for what, pair := range map[string][2]map[string]int{
		"docker":     {snap.DockerContainers, want.docker},
		"containers": {snap.Containers, want.containers},
		"sandboxes":  {snap.Sandboxes, want.sandboxes},
	} {
		got, w := pair[0], pair[1]
		for s, n := range w {
			if got[s] != n {
				t.Errorf("%s[%s] = %d, want %d", what, s, got[s], n)
			}
		}
		if sum(got) != sum(w) {
			t.Errorf("%s: %v, want %v", what, got, w)
		}
	}
	// The streamed views are those of the whole list decoded at once.
	var whole []Summary
	if err := json.Unmarshal(body, &whole); err != nil {
		t.Fatal(err)
	}
	v := Summarize(whole)
	if v.Unconvertible != want.unconvertible {
		t.Errorf("unconvertible = %d, want %d", v.Unconvertible, want.unconvertible)
	}
	for _, rpc := range []struct {
		name string
		want int64
	}{{kubecontainer.RPCListContainers, v.ContainersBytes}, {kubecontainer.RPCListPodSandbox, v.SandboxesBytes}} {
		if got := snap.RPCs[rpc.name]; !got.PayloadKnown || got.PayloadBytes != rpc.want {
			t.Errorf("%s payload = %d, want %d", rpc.name, got.PayloadBytes, rpc.want)
		}
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// One Summary is reused for every item: nothing of one container may show
// in the next (labels, names, a missing status).
func TestDecodeListResetsEachItem(t *testing.T) {
	body := `[{"Id":"a","Names":["/k8s_app_p_ns_uid_0","/alias"],"Status":"Up 1 second","State":"running",
	           "Labels":{"io.kubernetes.docker.type":"container","x":"1"}},
	          {"Id":"b","Labels":{"y":"2"}},
	          {"Id":"c","Labels":null,"Names":null}]`
	var got []Summary
	err := decodeList(strings.NewReader(body), func(s *Summary) {
		c := *s
		c.Names = append([]string(nil), s.Names...)
		c.Labels = map[string]string{}
		for k, v := range s.Labels {
			c.Labels[k] = v
		}
		got = append(got, c)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Summary{
		{ID: "a", Names: []string{"/k8s_app_p_ns_uid_0", "/alias"}, Status: "Up 1 second", State: "running", Labels: map[string]string{"io.kubernetes.docker.type": "container", "x": "1"}},
		{ID: "b", Labels: map[string]string{"y": "2"}},
		{ID: "c", Labels: map[string]string{}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("decoded\n%v\nwant\n%v", got, want)
	}
	for _, bad := range []string{``, `{}`, `null`, `[{"Id":1}]`, `[{"Id":"a"}`} {
		if err := decodeList(strings.NewReader(bad), func(*Summary) {}); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
}

// An answer over the receive limit fails the relist as ResourceExhausted,
// the code the CRI path gives an answer over its gRPC limit.
func TestListOverLimit(t *testing.T) {
	body, _ := synthContainers(1000)
	const limit = 1 << 20
	if len(body) <= limit {
		t.Fatalf("fixture of %d bytes is not over the limit", len(body))
	}
	for _, withLength := range []bool{false, true} {
		t.Run(fmt.Sprintf("content-length=%v", withLength), func(t *testing.T) {
			c, err := New(Config{Host: serveList(t, body, withLength), Timeout: time.Minute, MaxBytes: limit})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			snap := c.Relist(context.Background())
			if code := kubecontainer.ErrorCode(snap.Err); code != "ResourceExhausted" || snap.Counted {
				t.Fatalf("code = %q, counted = %v, err = %v; want ResourceExhausted", code, snap.Counted, snap.Err)
			}
			t.Logf("%s: %v", kubecontainer.ErrorCode(snap.Err), snap.Err)
			if !strings.Contains(snap.Err.Error(), "1048576 bytes") {
				t.Errorf("err = %v, want the limit in it", snap.Err)
			}
			if snap.DockerErr == nil || snap.DockerContainers != nil {
				t.Errorf("docker view of a failed list: %v %v", snap.DockerErr, snap.DockerContainers)
			}
			if _, err := c.Inventory(context.Background()); kubecontainer.ErrorCode(err) != "ResourceExhausted" {
				t.Errorf("inventory: %v", err)
			}
		})
	}
}

// A list over the cap is an answer, not a sign of another daemon: the
// API version is not negotiated again before every relist while it lasts.
func TestOverLimitDoesNotRenegotiate(t *testing.T) {
	body, _ := synthContainers(1000)
	var pings atomic.Int64
	c, err := New(Config{Host: serveListCounting(t, body, false, &pings), Timeout: time.Minute, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 3 {
		if code := kubecontainer.ErrorCode(c.Relist(context.Background()).Err); code != "ResourceExhausted" {
			t.Fatalf("code %q, want ResourceExhausted", code)
		}
	}
	if n := pings.Load(); n != 1 {
		t.Errorf("%d version pings for 3 relists over the cap, want 1", n)
	}
}
