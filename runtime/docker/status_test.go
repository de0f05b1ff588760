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
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// statusDaemon is a fake Docker API for one pod's inspection: the filtered
// lists, the inspects, and what each request was, in order.
type statusDaemon struct {
	mu       sync.Mutex
	requests []string // "METHOD path?query", the version prefix cut
	// sandboxes and containers are the list items, in the order Docker
	// lists them.
	sandboxes, containers []container.Summary
	inspect               map[string]container.InspectResponse
	// behave overrides the answer to one path (404, hang, garbage).
	behave map[string]func(w http.ResponseWriter, r *http.Request)
	images map[string]bool // image ids the daemon knows
	// release unblocks the hung handlers when the test ends.
	release chan struct{}
}

const (
	podUID    = "0f3c1a2b-0001-4a4a-8b8b-000000000001"
	podName   = "web-0"
	podNS     = "shop"
	oldSB     = "00000000000000000000000000000000000000000000000000000000000a0001"
	newSB     = "00000000000000000000000000000000000000000000000000000000000a0002"
	appCT     = "00000000000000000000000000000000000000000000000000000000000c0001"
	sidecarCT = "00000000000000000000000000000000000000000000000000000000000c0002"
)

var imageID = "sha256:" + strings.Repeat("ab", 32)

func kubeLabels(kind string, extra ...string) map[string]string {
	l := map[string]string{typeLabel: kind, podUIDLabel: podUID, podNameLabel: podName, podNamespaceLabel: podNS}
	for i := 0; i+1 < len(extra); i += 2 {
		l[extra[i]] = extra[i+1]
	}
	return l
}

// newStatusDaemon makes the pod: two sandboxes (the older one running on
// the pod network, listed first to prove the sort; the newer one exited),
// and two containers, the second one's image gone.
func newStatusDaemon() *statusDaemon {
	d := &statusDaemon{inspect: map[string]container.InspectResponse{}, behave: map[string]func(http.ResponseWriter, *http.Request){},
		images: map[string]bool{imageID: true}, release: make(chan struct{})}
	sb := func(id string, attempt int, created int64, running bool) {
		name := fmt.Sprintf("/k8s_POD_%s_%s_%s_%d", podName, podNS, podUID, attempt)
		status := "Exited (0) 1 hour ago"
		if running {
			status = "Up 1 hour"
		}
		d.sandboxes = append(d.sandboxes, container.Summary{ID: id, Names: []string{name}, Created: created, Status: status,
			Labels: kubeLabels(typeSandbox, containerNameLabel, "POD")})
		d.inspect[id] = container.InspectResponse{
			ContainerJSONBase: &container.ContainerJSONBase{ID: id, Name: name, Image: imageID,
				State:      &container.State{Running: running, Status: map[bool]container.ContainerState{true: "running", false: "exited"}[running]},
				HostConfig: &container.HostConfig{NetworkMode: "default"}},
			Config:          &container.Config{Labels: kubeLabels(typeSandbox)},
			NetworkSettings: &container.NetworkSettings{},
		}
	}
	sb(oldSB, 0, 1764500000, true)
	sb(newSB, 1, 1764500100, false)
	ct := func(id, name, img string) {
		n := fmt.Sprintf("/k8s_%s_%s_%s_%s_0", name, podName, podNS, podUID)
		d.containers = append(d.containers, container.Summary{ID: id, Names: []string{n}, Created: 1764500200, Status: "Up 1 hour", Image: "registry.example/web:1",
			ImageID: img, Labels: kubeLabels(typeContainer, containerNameLabel, name, sandboxIDLabel, newSB)})
		d.inspect[id] = container.InspectResponse{
			ContainerJSONBase: &container.ContainerJSONBase{ID: id, Name: n, Image: img, State: &container.State{Running: true, Status: "running"},
				HostConfig: &container.HostConfig{NetworkMode: container.NetworkMode("container:" + newSB)}},
			Config: &container.Config{Labels: kubeLabels(typeContainer)},
		}
	}
	ct(appCT, "app", imageID)
	ct(sidecarCT, "sidecar", "sha256:"+strings.Repeat("cd", 32)) // an image removed since
	return d
}

func (d *statusDaemon) serve(t *testing.T, cfg Config) *Client {
	t.Helper()
	path := filepath.Join(t.TempDir(), "docker.sock")
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/_ping", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Api-Version", "1.43")
		w.Write([]byte("OK"))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		p := strings.TrimPrefix(r.URL.Path, "/v1.43")
		d.mu.Lock()
		d.requests = append(d.requests, r.Method+" "+p+"?"+r.URL.RawQuery)
		h := d.behave[p]
		d.mu.Unlock()
		if r.Method != http.MethodGet {
			http.Error(w, `{"message":"fake: writes are not served"}`, http.StatusMethodNotAllowed)
			return
		}
		if h != nil {
			h(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case p == "/containers/json":
			f, err := filters.FromJSON(r.URL.Query().Get("filters"))
			if err != nil || r.URL.Query().Get("all") != "1" {
				http.Error(w, `{"message":"bad filters"}`, http.StatusBadRequest)
				return
			}
			out := []container.Summary{} // Docker answers [] for none
			for _, c := range append(append([]container.Summary(nil), d.sandboxes...), d.containers...) {
				ok := true
				for _, l := range f.Get("label") {
					k, v, _ := strings.Cut(l, "=")
					ok = ok && c.Labels[k] == v
				}
				if ok {
					out = append(out, c)
				}
			}
			json.NewEncoder(w).Encode(out)
		case strings.HasPrefix(p, "/containers/") && strings.HasSuffix(p, "/json"):
			resp, ok := d.inspect[strings.TrimSuffix(strings.TrimPrefix(p, "/containers/"), "/json")]
			if !ok {
				http.Error(w, `{"message":"No such container"}`, http.StatusNotFound)
				return
			}
			json.NewEncoder(w).Encode(resp)
		case strings.HasPrefix(p, "/images/") && strings.HasSuffix(p, "/json"):
			id := strings.TrimSuffix(strings.TrimPrefix(p, "/images/"), "/json")
			if !d.images[id] {
				http.Error(w, `{"message":"No such image"}`, http.StatusNotFound)
				return
			}
			json.NewEncoder(w).Encode(image.InspectResponse{ID: id, RepoTags: []string{"registry.example/web:1"}})
		default:
			http.Error(w, `{"message":"page not found"}`, http.StatusNotFound)
		}
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(lis)
	t.Cleanup(func() { close(d.release); srv.Close() })
	cfg.Host = "unix://" + path
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func (d *statusDaemon) sent() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.requests...)
}

// The exact filters parameter moby's client sends for cri-dockerd.
func wantFilter(kind string) string {
	return `{"label":{"io.kubernetes.docker.type=` + kind + `":true,"` + podUIDLabel + "=" + podUID + `":true}}`
}

func calls(ins kubecontainer.PodInspection) []string {
	var out []string
	for _, c := range ins.Calls {
		s := c.RPC
		if c.ID != "" {
			s += " " + c.ID[len(c.ID)-5:]
		}
		if c.Err != nil {
			s += " " + kubecontainer.ErrorCode(c.Err)
		}
		out = append(out, s)
	}
	return out
}

func TestInspectPodCallsInTheKubeletsOrder(t *testing.T) {
	d := newStatusDaemon()
	c := d.serve(t, Config{})
	var began []string
	var ended []kubecontainer.StatusCall
	ins := c.InspectPod(context.Background(), podUID, kubecontainer.CallTracker{
		Begin: func(rpc, id string) { began = append(began, rpc+" "+id) },
		End:   func(sc kubecontainer.StatusCall) { ended = append(ended, sc) },
	})
	if ins.Err != nil {
		t.Fatalf("inspection failed: %v (at %+v)", ins.Err, ins.Failed)
	}
	want := []string{"ListPodSandbox", "PodSandboxStatus a0002", "PodSandboxStatus a0001", "ListContainers", "ContainerStatus c0001", "ContainerStatus c0002"}
	if got := calls(ins); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("calls\n%v\nwant\n%v", got, want)
	}
	if fmt.Sprint(ins.Sandboxes) != fmt.Sprint([]string{newSB, oldSB}) || fmt.Sprint(ins.Containers) != fmt.Sprint([]string{appCT, sidecarCT}) {
		t.Errorf("sandboxes %v containers %v", ins.Sandboxes, ins.Containers)
	}
	if ins.UID != podUID || ins.Name != podName || ins.Namespace != podNS {
		t.Errorf("pod %s/%s uid %s", ins.Namespace, ins.Name, ins.UID)
	}
	if ins.Start.IsZero() || ins.Duration <= 0 {
		t.Errorf("start %v duration %v", ins.Start, ins.Duration)
	}
	var sum time.Duration
	for _, sc := range ins.Calls {
		if sc.Start.Before(ins.Start) || sc.Duration <= 0 {
			t.Errorf("call %+v", sc)
		}
		sum += sc.Duration
	}
	if sum > ins.Duration {
		t.Errorf("calls took %v, the inspection %v", sum, ins.Duration)
	}
	// Every call told to the tracker as it began and as it ended.
	if len(began) != len(ins.Calls) || len(ended) != len(ins.Calls) {
		t.Fatalf("tracker: %d begun, %d ended, %d calls", len(began), len(ended), len(ins.Calls))
	}
	for i, sc := range ins.Calls {
		if began[i] != sc.RPC+" "+sc.ID || ended[i].RPC != sc.RPC || ended[i].ID != sc.ID || ended[i].Duration != sc.Duration {
			t.Errorf("tracker %d: began %q, ended %+v, call %+v", i, began[i], ended[i], sc)
		}
	}
	// The Docker calls cri-dockerd makes, exactly: the running sandbox on
	// the pod network is inspected twice (the CNI plugin's GetNetNS), the
	// exited one once; each container and its image, the image that is
	// gone not being an error.
	wantReq := []string{
		"GET /containers/json?all=1&filters=" + urlQuery(wantFilter(typeSandbox)),
		"GET /containers/" + newSB + "/json?",
		"GET /containers/" + oldSB + "/json?",
		"GET /containers/" + oldSB + "/json?",
		"GET /containers/json?all=1&filters=" + urlQuery(wantFilter(typeContainer)),
		"GET /containers/" + appCT + "/json?",
		"GET /images/" + imageID + "/json?",
		"GET /containers/" + sidecarCT + "/json?",
		"GET /images/sha256:" + strings.Repeat("cd", 32) + "/json?",
	}
	if got := d.sent(); strings.Join(got, "\n") != strings.Join(wantReq, "\n") {
		t.Errorf("requests\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantReq, "\n"))
	}
	// Our own encoding is moby's: cri-dockerd's filters, byte for byte.
	if got := statusFilter(typeSandbox, podUID); got != wantFilter(typeSandbox) {
		t.Errorf("filter %s, want %s", got, wantFilter(typeSandbox))
	}
}

func urlQuery(s string) string { return url.QueryEscape(s) }

// Containers a pod does not have are not asked about; an unknown pod is two
// empty lists.
func TestInspectPodUnknownPod(t *testing.T) {
	d := newStatusDaemon()
	c := d.serve(t, Config{})
	ins := c.InspectPod(context.Background(), "no-such-uid", kubecontainer.CallTracker{})
	if ins.Err != nil || fmt.Sprint(calls(ins)) != "[ListPodSandbox ListContainers]" || ins.Name != "" || len(ins.Sandboxes)+len(ins.Containers) != 0 {
		t.Errorf("err %v calls %v pod %q", ins.Err, calls(ins), ins.Name)
	}
}

// Docker's 404 for an item gone between the list and its inspect is the
// kubelet's NotFound: recorded, skipped, the inspection goes on.
func TestInspectPodNotFoundSkipped(t *testing.T) {
	d := newStatusDaemon()
	delete(d.inspect, newSB)
	delete(d.inspect, appCT)
	c := d.serve(t, Config{})
	ins := c.InspectPod(context.Background(), podUID, kubecontainer.CallTracker{})
	if ins.Err != nil {
		t.Fatalf("inspection failed: %v", ins.Err)
	}
	want := []string{"ListPodSandbox", "PodSandboxStatus a0002 NotFound", "PodSandboxStatus a0001", "ListContainers", "ContainerStatus c0001 NotFound", "ContainerStatus c0002"}
	if got := calls(ins); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("calls\n%v\nwant\n%v", got, want)
	}
	if ins.Name != podName {
		t.Errorf("pod name %q: the listed sandbox names the pod even when it went", ins.Name)
	}
}

// A sandbox inspect that hangs (a Dead sandbox, a stuck mount) holds the
// inspection for the whole per-call deadline, fails as DeadlineExceeded,
// and no later call is made, as in the kubelet.
func TestInspectPodHangHitsTheDeadline(t *testing.T) {
	d := newStatusDaemon()
	d.behave["/containers/"+newSB+"/json"] = func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-d.release:
		}
	}
	const timeout = 300 * time.Millisecond
	c := d.serve(t, Config{Timeout: timeout})
	var ended []kubecontainer.StatusCall
	ins := c.InspectPod(context.Background(), podUID, kubecontainer.CallTracker{End: func(sc kubecontainer.StatusCall) { ended = append(ended, sc) }})
	if code := kubecontainer.ErrorCode(ins.Err); code != "DeadlineExceeded" {
		t.Fatalf("code %q, err %v; want DeadlineExceeded", code, ins.Err)
	}
	if ins.Failed.RPC != kubecontainer.RPCPodSandboxStatus || ins.Failed.ID != newSB || ins.Failed.Err != ins.Err {
		t.Errorf("failed call %+v", ins.Failed)
	}
	if ins.Failed.Duration < timeout || ins.Failed.Duration > timeout+2*time.Second {
		t.Errorf("the hung call took %v, the deadline is %v", ins.Failed.Duration, timeout)
	}
	if fmt.Sprint(ins.Sandboxes) != fmt.Sprint([]string{newSB}) || ins.Containers != nil {
		t.Errorf("inspected sandboxes %v, containers %v", ins.Sandboxes, ins.Containers)
	}
	if fmt.Sprint(calls(ins)) != "[ListPodSandbox PodSandboxStatus a0002 DeadlineExceeded]" || len(ended) != 2 {
		t.Errorf("calls %v, %d ended", calls(ins), len(ended))
	}
	for _, r := range d.sent() {
		if strings.Contains(r, oldSB) || strings.Contains(r, "type%3Dcontainer") || strings.Contains(r, appCT) {
			t.Errorf("made after the failed call: %s", r)
		}
	}
	t.Logf("%v", ins.Err)
}

// The same for a filtered list that hangs, and for an image inspect.
func TestInspectPodHangInListAndImage(t *testing.T) {
	for name, path := range map[string]string{"list": "/containers/json", "image": "/images/" + imageID + "/json"} {
		t.Run(name, func(t *testing.T) {
			d := newStatusDaemon()
			d.behave[path] = func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-r.Context().Done():
				case <-d.release:
				}
			}
			c := d.serve(t, Config{Timeout: 200 * time.Millisecond})
			ins := c.InspectPod(context.Background(), podUID, kubecontainer.CallTracker{})
			if code := kubecontainer.ErrorCode(ins.Err); code != "DeadlineExceeded" {
				t.Fatalf("code %q, err %v", code, ins.Err)
			}
			want := map[string]string{"list": kubecontainer.RPCListPodSandbox, "image": kubecontainer.RPCContainerStatus}[name]
			if ins.Failed.RPC != want || ins.Calls[len(ins.Calls)-1].RPC != want {
				t.Errorf("failed at %+v, calls %v", ins.Failed, calls(ins))
			}
		})
	}
}

// A hang in the middle of an answer (headers sent, body stalled) is the
// deadline too, not a decoding error.
func TestInspectPodStalledBody(t *testing.T) {
	d := newStatusDaemon()
	d.behave["/containers/"+appCT+"/json"] = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"Id":"` + appCT + `","Name":`))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-d.release:
		}
	}
	c := d.serve(t, Config{Timeout: 300 * time.Millisecond})
	ins := c.InspectPod(context.Background(), podUID, kubecontainer.CallTracker{})
	if code := kubecontainer.ErrorCode(ins.Err); code != "DeadlineExceeded" || ins.Failed.ID != appCT {
		t.Fatalf("code %q at %+v: %v", code, ins.Failed, ins.Err)
	}
}

// Answers that are not the API's JSON end the inspection with an error
// that says so.
func TestInspectPodMalformed(t *testing.T) {
	for name, tc := range map[string]struct {
		path, body, rpc, want string
	}{
		"sandbox inspect":             {"/containers/" + newSB + "/json", `{"Id": "x", "Name": [}`, kubecontainer.RPCPodSandboxStatus, "malformed answer"},
		"container inspect truncated": {"/containers/" + appCT + "/json", `{"Id": "x", "Name": "/k8s_`, kubecontainer.RPCContainerStatus, "malformed answer"},
		"inspect of nothing":          {"/containers/" + appCT + "/json", `{}`, kubecontainer.RPCContainerStatus, "no container in it"},
		"sandbox list":                {"/containers/json", `{"not":"a list"}`, kubecontainer.RPCListPodSandbox, "decode container list"},
		"list item":                   {"/containers/json", `[{"Id": 7}]`, kubecontainer.RPCListPodSandbox, "decode container list"},
		"image":                       {"/images/" + imageID + "/json", `[`, kubecontainer.RPCContainerStatus, "malformed answer"},
	} {
		t.Run(name, func(t *testing.T) {
			d := newStatusDaemon()
			d.behave[tc.path] = func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(tc.body))
			}
			c := d.serve(t, Config{})
			ins := c.InspectPod(context.Background(), podUID, kubecontainer.CallTracker{})
			if ins.Err == nil || !strings.Contains(ins.Err.Error(), tc.want) || ins.Failed.RPC != tc.rpc {
				t.Fatalf("err %v at %s, want %q at %s", ins.Err, ins.Failed.RPC, tc.want, tc.rpc)
			}
			if code := kubecontainer.ErrorCode(ins.Err); code != "Unknown" {
				t.Errorf("code %q", code)
			}
			t.Logf("%v", ins.Err)
		})
	}
}

// A sandbox Docker names in a way cri-dockerd cannot parse fails its status
// call, as cri-dockerd's does.
func TestInspectPodUnparsableName(t *testing.T) {
	d := newStatusDaemon()
	r := d.inspect[newSB]
	base := *r.ContainerJSONBase
	base.Name = "/renamed"
	r.ContainerJSONBase = &base
	d.inspect[newSB] = r
	c := d.serve(t, Config{})
	ins := c.InspectPod(context.Background(), podUID, kubecontainer.CallTracker{})
	if ins.Err == nil || ins.Failed.ID != newSB || !strings.Contains(ins.Err.Error(), "not managed by kubernetes") {
		t.Fatalf("err %v at %+v", ins.Err, ins.Failed)
	}
}

// The filtered lists are read under the receive limit: an answer past it
// is ResourceExhausted, never held whole.
func TestInspectPodListOverLimit(t *testing.T) {
	d := newStatusDaemon()
	body, _ := synthContainers(2000)
	d.behave["/containers/json"] = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body) // chunked: the limit is found while reading
	}
	const limit = 256 << 10
	c := d.serve(t, Config{MaxBytes: limit})
	ins := c.InspectPod(context.Background(), podUID, kubecontainer.CallTracker{})
	if code := kubecontainer.ErrorCode(ins.Err); code != "ResourceExhausted" || ins.Failed.RPC != kubecontainer.RPCListPodSandbox {
		t.Fatalf("code %q at %s: %v", code, ins.Failed.RPC, ins.Err)
	}
	if !strings.Contains(ins.Err.Error(), "262144 bytes") || len(ins.Sandboxes) != 0 {
		t.Errorf("err %v, sandboxes %d", ins.Err, len(ins.Sandboxes))
	}
	// An inspect past the limit too.
	d2 := newStatusDaemon()
	d2.behave["/containers/"+appCT+"/json"] = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"Id":"%s","Name":"/x","Config":{"Labels":{"big":"%s"}}}`, appCT, strings.Repeat("x", 2*limit))
	}
	c2 := d2.serve(t, Config{MaxBytes: limit})
	ins = c2.InspectPod(context.Background(), podUID, kubecontainer.CallTracker{})
	if code := kubecontainer.ErrorCode(ins.Err); code != "ResourceExhausted" || ins.Failed.ID != appCT {
		t.Fatalf("inspect: code %q at %+v: %v", code, ins.Failed, ins.Err)
	}
}

// The caller's context ends every call: a cancelled pass makes no further
// call and says Canceled.
func TestInspectPodCanceled(t *testing.T) {
	d := newStatusDaemon()
	ctx, cancel := context.WithCancel(context.Background())
	d.behave["/containers/"+oldSB+"/json"] = func(w http.ResponseWriter, r *http.Request) {
		cancel()
		<-r.Context().Done()
	}
	c := d.serve(t, Config{})
	ins := c.InspectPod(ctx, podUID, kubecontainer.CallTracker{})
	if code := kubecontainer.ErrorCode(ins.Err); code != "Canceled" || ins.Failed.ID != oldSB {
		t.Fatalf("code %q at %+v: %v", code, ins.Failed, ins.Err)
	}
	if n := len(ins.Calls); n != 3 {
		t.Errorf("calls %v", calls(ins))
	}
}

// The status pass sends GET only, and the guards under it still refuse
// every write afterwards, the daemon seeing none of them.
func TestInspectPodReadOnly(t *testing.T) {
	d := newStatusDaemon()
	c := d.serve(t, Config{})
	sock := strings.TrimPrefix(c.cfg.Host, "unix://")
	p := startProxy(t, sock)
	pc, err := New(Config{Host: p.Endpoint, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if ins := pc.InspectPod(context.Background(), podUID, kubecontainer.CallTracker{}); ins.Err != nil || len(ins.Calls) != 6 {
		t.Fatalf("inspection: %v, %v", ins.Err, calls(ins))
	}
	tryAttacks(t, pc, p, appCT)
	// The list's own http path refuses a write as well.
	req, _ := http.NewRequest(http.MethodPost, "http://"+"api.moby.localhost/v1.43/containers/"+appCT+"/kill", nil)
	if _, err := pc.http.Do(req); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("POST through the list's client: %v", err)
	}
	for _, r := range d.sent() {
		if !strings.HasPrefix(r, "GET ") {
			t.Errorf("the daemon saw %s", r)
		}
	}
}
