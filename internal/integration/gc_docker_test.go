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
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
)

// kubeDocker creates Docker containers named and labelled as cri-dockerd
// does for the kubelet.
type kubeDocker struct {
	t   *testing.T
	c   context.Context
	api *client.Client
}

func (k kubeDocker) sandbox(pod, ns, uid string, attempt int, cmd []string) string {
	labels := map[string]string{"io.kubernetes.docker.type": "podsandbox", "io.kubernetes.container.name": "POD",
		"io.kubernetes.pod.name": pod, "io.kubernetes.pod.namespace": ns, "io.kubernetes.pod.uid": uid}
	return k.create(fmt.Sprintf("k8s_POD_%s_%s_%s_%d", pod, ns, uid, attempt), labels, cmd)
}

func (k kubeDocker) container(sandbox, name, pod, ns, uid string, attempt int, cmd []string, pad string) string {
	labels := map[string]string{"io.kubernetes.docker.type": "container", "io.kubernetes.container.name": name,
		"io.kubernetes.sandbox.id": sandbox, "io.kubernetes.pod.name": pod, "io.kubernetes.pod.namespace": ns, "io.kubernetes.pod.uid": uid,
		"annotation.io.kubernetes.container.restartCount": fmt.Sprint(attempt)}
	if pad != "" {
		labels["annotation.example.com/payload"] = pad
	}
	return k.create(fmt.Sprintf("k8s_%s_%s_%s_%s_%d", name, pod, ns, uid, attempt), labels, cmd)
}

func (k kubeDocker) create(name string, labels map[string]string, cmd []string) string {
	resp, err := k.api.ContainerCreate(k.c, &container.Config{Image: testenv.Image, Labels: labels, Cmd: cmd},
		&container.HostConfig{NetworkMode: "none"}, &network.NetworkingConfig{}, nil, name)
	if err != nil {
		k.t.Fatalf("create %s: %v", name, err)
	}
	return resp.ID
}

func (k kubeDocker) run(id string, wait bool) {
	if err := k.api.ContainerStart(k.c, id, container.StartOptions{}); err != nil {
		k.t.Fatal(err)
	}
	if wait {
		okc, errc := k.api.ContainerWait(k.c, id, container.WaitConditionNotRunning)
		select {
		case <-okc:
		case err := <-errc:
			k.t.Fatal(err)
		}
	}
}

// dockerStates is `docker ps -a`: id → state.
func dockerStates(t *testing.T, c context.Context, api *client.Client) map[string]string {
	t.Helper()
	list, err := api.ContainerList(c, container.ListOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, ct := range list {
		m[ct.ID] = ct.State
	}
	return m
}

// gc through the Docker API on a real dockerd: dead containers (one whose
// removal fails again, one that can go now), a population whose estimated
// ListContainers answer is past 16 MiB, running, paused and plain Docker
// containers. The plan removes the dead ones and the older attempts; the
// removal that fails is reported with its reason and the rest goes on;
// nothing else is touched; a second run after the cause is gone finishes.
func TestGCOnDocker(t *testing.T) {
	need(t, dockErr)
	bin := exporterBinary(t)
	d, err := testenv.StartDockerd(filepath.Join(workRoot, "gc-docker"))
	need(t, err)
	defer d.Stop()
	c := ctx(t, 10*time.Minute)
	k := kubeDocker{t: t, c: c, api: d.API}
	sleep := []string{"/bin/sleep", "100000"}

	// The dead first: Docker lists a failed removal as dead once it
	// reloads its state, and the restart that makes it do so stops every
	// container.
	cronUID := "0f3c1a2b-0000-4a4a-8b8b-00000000c0de"
	cronSB := k.sandbox("cron-1", "batch", cronUID, 0, []string{"/bin/true"})
	k.run(cronSB, true)
	var pins []string
	var dead []string
	for a := 0; a < 2; a++ {
		id := k.container(cronSB, "worker", "cron-1", "batch", cronUID, a, []string{"/bin/true"}, "")
		k.run(id, true)
		pin, err := d.MakeDeadPinned(c, id)
		if err != nil {
			t.Fatal(err)
		}
		pins, dead = append(pins, pin), append(dead, id)
	}
	if err := d.Restart(); err != nil {
		t.Fatal(err)
	}
	// The second dead container can go now; the first keeps failing.
	if err := testenv.Unpin(pins[1]); err != nil {
		t.Fatal(err)
	}

	want, keep := map[string]bool{dead[0]: true, dead[1]: true}, map[string]bool{}
	pad := strings.Repeat("p", 64<<10)
	for i := 0; i < 14; i++ {
		pod, uid := fmt.Sprintf("web-%d", i), fmt.Sprintf("0f3c1a2b-%04d-4a4a-8b8b-000000000001", i)
		sb := k.sandbox(pod, "shop", uid, 0, sleep)
		k.run(sb, false)
		keep[sb] = true
		app := k.container(sb, "app", pod, "shop", uid, 0, sleep, "")
		k.run(app, false)
		keep[app] = true
		// Twenty attempts of a job that never started (a crash loop
		// before its process ran): the newest stays.
		for a := 0; a < 20; a++ {
			id := k.container(sb, "job", pod, "shop", uid, a, []string{"/bin/true"}, pad)
			if a < 19 {
				want[id] = true
			} else {
				keep[id] = true
			}
		}
		if i == 0 {
			side := k.container(sb, "sidecar", pod, "shop", uid, 0, sleep, "")
			k.run(side, false)
			if err := d.API.ContainerPause(c, side); err != nil {
				t.Fatal(err)
			}
			keep[side] = true
		}
	}
	// Plain Docker containers the kubelet never sees, one exited.
	for _, name := range []string{"registry", "buildkit"} {
		resp, err := d.API.ContainerCreate(c, &container.Config{Image: testenv.Image, Cmd: []string{"/bin/true"}}, &container.HostConfig{NetworkMode: "none"}, nil, nil, name)
		if err != nil {
			t.Fatal(err)
		}
		k.run(resp.ID, true)
		keep[resp.ID] = true
	}
	before := dockerStates(t, c, d.API)
	if before[dead[0]] != "dead" || before[dead[1]] != "dead" {
		t.Fatalf("not dead: %s, %s", before[dead[0]], before[dead[1]])
	}

	endpoint := []string{"--runtime=docker", "--runtime.endpoint=" + d.Endpoint()}
	dry, code, stderr := runGC(t, bin, endpoint...)
	if code != 0 {
		t.Fatalf("dry run exit %d: %s", code, stderr)
	}
	if got := dockerStates(t, c, d.API); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatal("the dry run changed the daemon")
	}
	if diff := diffSets(ids(dry.Plans["kubelet"].Actions), want); diff != "" {
		t.Errorf("plan: %s", diff)
	}
	if dry.Before["ListContainers"] <= 16<<20 {
		t.Errorf("estimated ListContainers %d bytes, want past 16 MiB", dry.Before["ListContainers"])
	}
	for _, a := range dry.Plans["kubelet"].Actions {
		if (a.ID == dead[0] || a.ID == dead[1]) && a.Rule != "dead" {
			t.Errorf("dead container planned as %q", a.Rule)
		}
	}

	r, code, stderr := runGC(t, bin, append(endpoint, "--apply")...)
	if code != 1 || r.Applied == nil || len(r.Applied.Failures) != 1 {
		t.Fatalf("apply: exit %d (want 1: one removal fails), %+v\n%s", code, r.Applied, stderr)
	}
	f := r.Applied.Failures[0]
	if f.Action.ID != dead[0] || !strings.Contains(f.Error, "operation not permitted") || f.Hint == "" {
		t.Errorf("the failure: %+v", f)
	}
	t.Logf("the failed removal is reported: %s → %s", f.Error, f.Hint)
	after := dockerStates(t, c, d.API)
	for id, st := range before {
		_, there := after[id]
		switch {
		case id == dead[0]:
			if !there {
				t.Error("the pinned dead container went")
			}
		case want[id] && there:
			t.Errorf("%s (%s) was planned and is still there", id[:12], st)
		case !want[id] && after[id] != st:
			t.Errorf("%s changed from %s to %q", id[:12], st, after[id])
		}
	}
	if r.Check == nil || !r.Check.Fits {
		t.Errorf("check after the run: %+v", r.Check)
	}

	// Docker lists a container whose removal failed again as removing
	// until it restarts; gc treats it as dead.
	if st := after[dead[0]]; st != "removing" && st != "dead" {
		t.Errorf("after the failed removal Docker lists it as %q", st)
	}
	t.Logf("after the first run Docker lists the pinned container as %q", after[dead[0]])
	// The cause gone, the same command finishes the job.
	if err := testenv.Unpin(pins[0]); err != nil {
		t.Fatal(err)
	}
	r, code, stderr = runGC(t, bin, append(endpoint, "--apply")...)
	if code != 0 || r.Applied == nil || r.Applied.Removed["container"] != 1 {
		t.Fatalf("second run: exit %d, %+v\n%s", code, r.Applied, stderr)
	}
	if _, there := dockerStates(t, c, d.API)[dead[0]]; there {
		t.Error("the dead container is still there after the second run")
	}
}
