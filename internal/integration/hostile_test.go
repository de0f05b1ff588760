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
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/diagnose"
	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
	"github.com/pleg-exporter/pleg_exporter/runtime/detect"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// swapCodec marshals requests with protobuf, then replaces each placeholder
// with a value of the same length that Go's protobuf refuses to marshal
// (invalid UTF-8 in a string field): the only way to hand containerd such a
// name from Go. containerd 1.6 decodes the CRI with gogo protobuf, which
// does not check UTF-8, and hands the bytes back in its lists as they are.
type swapCodec struct{ from, to [][]byte }

func (swapCodec) Name() string { return "proto" }

func (s swapCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, err := proto.Marshal(v.(proto.Message))
	if err != nil {
		return nil, err
	}
	for i := range s.from {
		b = bytes.ReplaceAll(b, s.from[i], s.to[i])
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (swapCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}

var _ encoding.CodecV2 = swapCodec{}

// A namespace and a pod name as anyone who can create containers on a node
// can label them, each a shell payload that writes a file when it runs:
// under canary (absolute) or in the working directory (relative).
func hostileNamespaces(canary string) []string {
	return []string{
		"x;touch " + canary + "/semicolon;#",
		"$(touch " + canary + "/dollar)",
		"`touch " + canary + "/backtick`",
		"it's'$(touch " + canary + "/quote)'",
		"ns\ntouch " + canary + "/newline",
		"\x1b[2J\x1b]0;owned\x07$(touch " + canary + "/ansi)",
		"\xff\xfe;touch nonutf8-ns;#", // sent through swapCodec
	}
}

func hostilePods(canary string) []string {
	return []string{
		`a"$(touch ` + canary + `/dquote)"`,
		"-n;touch pwned-relative",
		"\xfe\xff$(touch nonutf8-pod)", // sent through swapCodec
	}
}

// placeholder is a valid UTF-8 stand-in of the same length for a name that
// is not valid UTF-8.
func placeholder(name string, i int) string {
	if utf8.ValidString(name) {
		return name
	}
	p := fmt.Sprintf("Q%d", i)
	return p + name[len(p):]
}

// The test: sandboxes and containers whose namespaces and pod names
// are shell payloads, terminal escapes and invalid UTF-8, on a containerd of
// its own, beside ordinary ones; a report past the limit (so it names
// namespaces and pods). Every printed command must parse (sh -n), run with
// stub crictl and kubectl to exactly the argument vectors intended, and, run
// for real against containerd, create no file and remove exactly the
// containers and sandboxes it names.
func TestHostileNamesOnContainerd(t *testing.T) {
	need(t, ctdErr)
	crictl := crictlPath(t)
	own, err := testenv.StartContainerd(filepath.Join(workRoot, "hostile"))
	if err != nil {
		t.Fatal(err)
	}
	defer own.Stop()
	canary, work := t.TempDir(), t.TempDir()
	namespaces, pods := hostileNamespaces(canary), hostilePods(canary)

	var swap swapCodec
	for i, n := range append(slices.Clone(namespaces), pods...) {
		if p := placeholder(n, i); p != n {
			swap.from, swap.to = append(swap.from, []byte(p)), append(swap.to, []byte(n))
		}
	}
	cc, err := grpc.NewClient("unix://"+own.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(swap)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	k := &testenv.PodClient{RS: runtimeapi.NewRuntimeServiceClient(cc), LogDir: filepath.Join(workRoot, "hostile-pods")}
	c := ctx(t, 4*time.Minute)

	// Every /bin/true container, and whether the cleanup may remove it: the
	// ordinary namespaces' may go (and the finished pod), nothing else.
	removable := map[string]bool{}
	var sandboxes []string
	defer func() {
		// By ID: Stop's own sweep lists through Go's protobuf, which
		// refuses the invalid UTF-8 in the answer.
		c := ctx(t, time.Minute)
		for _, id := range sandboxes {
			k.RS.StopPodSandbox(c, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
			k.RS.RemovePodSandbox(c, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
		}
	}()
	exited := func(pod *testenv.Pod, n int, mark bool) {
		t.Helper()
		for a := 0; a < n; a++ {
			id, err := k.CreateContainer(c, pod, testenv.ContainerSpec{Name: "step", Attempt: uint32(a), Command: []string{"/bin/true"}, Start: true})
			if err != nil {
				t.Fatal(err)
			}
			removable[id] = mark
		}
	}
	run := func(ns, name string) *testenv.Pod {
		t.Helper()
		pod, err := k.RunPod(c, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		sandboxes = append(sandboxes, pod.ID)
		return pod
	}
	job := run("team-a", "job-1")
	exited(job, 1, true)
	if _, err := k.CreateContainer(c, job, testenv.ContainerSpec{Name: "web", Start: true}); err != nil {
		t.Fatal(err)
	}
	done := run("team-a", "done-1")
	exited(done, 1, true)
	exited(run("team-b", "cron-1"), 6, true)
	for i, p := range pods {
		exited(run("team-b", placeholder(p, len(namespaces)+i)), 1, false)
	}
	for i, ns := range namespaces {
		exited(run(placeholder(ns, i), fmt.Sprintf("job-%d", i)), 1, false)
	}

	rt, err := detect.Open(detect.Config{Kind: detect.KindCRI, Endpoint: own.Endpoint(), MaxRecvBytes: 256 << 20, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	// Every /bin/true has exited before the finished pod stops and the
	// report is built.
	var inv *kubecontainer.Inventory
	for {
		if inv, err = rt.Inventory(c); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ct := range inv.Containers {
			if ct.State == kubecontainer.ContainerExited {
				n++
			}
		}
		if n == len(removable) {
			break
		}
		if c.Err() != nil {
			t.Fatalf("waiting for %d exited containers, %d so far", len(removable), n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := k.StopPod(c, done); err != nil {
		t.Fatal(err)
	}
	if inv, err = rt.Inventory(c); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, ct := range inv.Containers {
		seen[ct.Namespace], seen[ct.Pod] = true, true
	}
	for _, n := range append(slices.Clone(namespaces), pods...) {
		if !seen[n] {
			t.Fatalf("containerd does not list the name %q as sent: the test would prove nothing", n)
		}
	}

	// A limit the exited list passes while team-b does not fit alone and
	// its largest pod, cron-1, does: the report goes namespace by namespace
	// and through team-b pod by pod.
	var teamB, cron1 int64
	for _, ct := range inv.Containers {
		if ct.State == kubecontainer.ContainerExited && ct.Namespace == "team-b" {
			teamB += ct.Bytes
			if ct.Pod == "cron-1" {
				cron1 += ct.Bytes
			}
		}
	}
	th := diagnose.DefaultThresholds
	th.LimitBytes = int64(float64(teamB+cron1) / 2 / 0.9)
	r := diagnose.Build(inv, th, time.Now())

	var text, js bytes.Buffer
	r.Text(&text)
	if !utf8.Valid(text.Bytes()) || strings.ContainsFunc(text.String(), func(r rune) bool { return r != '\n' && unicode.IsControl(r) }) {
		t.Errorf("the text report prints controls or invalid UTF-8:\n%q", text.String())
	}
	if err := r.JSON(&js); err != nil || !json.Valid(js.Bytes()) {
		t.Errorf("json report: %v", err)
	}

	// Stubs that record their argument vectors: count, name, arguments,
	// each NUL-terminated.
	stubs, argv := t.TempDir(), filepath.Join(t.TempDir(), "argv")
	for _, name := range []string{"crictl", "kubectl", "pleg_exporter"} {
		script := "#!/bin/sh\nprintf '%s\\0' \"$#\" \"${0##*/}\" \"$@\" >> " + argv + "\n"
		if err := os.WriteFile(filepath.Join(stubs, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	want := [][]string{
		{"kubectl", "cordon", "NODE"},
		{"kubectl", "drain", "NODE", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=5m"},
		{"crictl", "pods", "--state", "notready", "-q"},
		{"crictl", "ps", "-a", "--state", "exited", "--label", "io.kubernetes.pod.namespace=team-b", "--label", "io.kubernetes.pod.name=cron-1", "-q"},
		{"crictl", "ps", "-a", "--state", "exited", "--label", "io.kubernetes.pod.namespace=team-a", "-q"},
		{"kubectl", "-n", "team-b", "get", "jobs,cronjobs,pods"},
		{"kubectl", "uncordon", "NODE"},
	}
	var got [][]string
	for _, s := range r.Cleanup {
		if s.Command == "" {
			continue // a step left out: its text says why
		}
		for _, shell := range []string{"sh", "bash"} {
			if out, err := exec.Command(shell, "-n", "-c", s.Command).CombinedOutput(); err != nil {
				t.Errorf("%s -n %q: %v\n%s", shell, s.Command, err, out)
			}
		}
		os.Remove(argv)
		cmd := exec.CommandContext(c, "sh", "-c", s.Command)
		cmd.Dir, cmd.Env = work, append(os.Environ(), "PATH="+stubs+":"+os.Getenv("PATH"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("with stubs, %q: %v\n%s", s.Command, err, out)
		}
		vs := readArgv(t, argv)
		for _, v := range vs {
			if !slices.ContainsFunc(want, func(w []string) bool { return slices.Equal(w, v) }) {
				t.Errorf("%q runs %q, not a command the report means", s.Command, v)
			}
		}
		got = append(got, vs...)
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(g []string) bool { return slices.Equal(w, g) }) {
			t.Errorf("no printed command runs %q; ran %q", w, got)
		}
	}

	// For real, through crictl on this containerd, in an empty directory.
	before := listIDs(t, c, rt)
	env := append(os.Environ(), "CONTAINER_RUNTIME_ENDPOINT="+own.Endpoint(), "IMAGE_SERVICE_ENDPOINT="+own.Endpoint(),
		"PATH="+filepath.Dir(crictl)+":"+os.Getenv("PATH"))
	for _, s := range r.Cleanup {
		if !strings.HasPrefix(s.Command, "crictl ") {
			continue // kubectl and diagnose itself: nothing to run here
		}
		cmd := exec.CommandContext(c, "bash", "-o", "pipefail", "-c", s.Command)
		cmd.Dir, cmd.Env = work, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", s.Command, err, out)
		}
	}
	for _, dir := range []string{canary, work} {
		if entries, _ := os.ReadDir(dir); len(entries) > 0 {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Errorf("a payload ran: %s holds %q", dir, names)
		}
	}
	after := listIDs(t, c, rt)
	for id := range before {
		_, kept := after[id]
		switch {
		case id == done.ID || removable[id]:
			if kept {
				t.Errorf("%s (%s) should be gone after the cleanup", id, before[id])
			}
		case !kept:
			t.Errorf("the cleanup removed %s (%s), which it does not name", id, before[id])
		}
	}
	for i, s := range r.Cleanup {
		t.Logf("%d. %s\n   %s", i+1, strconv.QuoteToGraphic(s.Why), s.Command)
	}
}

// readArgv reads the stubs' record: per call, the count, the name and the
// arguments, each NUL-terminated.
func readArgv(t *testing.T, path string) [][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
	var calls [][]string
	for len(fields) > 0 {
		n, err := strconv.Atoi(fields[0])
		if err != nil || len(fields) < n+2 {
			t.Fatalf("stub record %q", b)
		}
		calls = append(calls, fields[1:n+2])
		fields = fields[n+2:]
	}
	return calls
}

// listIDs lists every sandbox and container through the exporter's own
// lister (Go's protobuf would refuse the invalid UTF-8 in the answers):
// the value says what it is.
func listIDs(t *testing.T, c context.Context, rt kubecontainer.Runtime) map[string]string {
	t.Helper()
	inv, err := rt.Inventory(c)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, s := range inv.Sandboxes {
		ids[s.ID] = fmt.Sprintf("sandbox %q/%q %s", s.Namespace, s.Pod, s.State)
	}
	for _, ct := range inv.Containers {
		ids[ct.ID] = fmt.Sprintf("container %q/%q/%s %s", ct.Namespace, ct.Pod, ct.Name, ct.State)
	}
	return ids
}
