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
	"math"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
	"github.com/pleg-exporter/pleg_exporter/runtime/docker"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// made remembers what the harness asked Docker for, to rebuild the CRI
// messages independently of the exporter's conversion.
type made struct {
	id, name, kind string
	labels         map[string]string // CRI labels as the kubelet passed them
	annotations    map[string]string
	sandboxID      string
	md             [4]string // name, pod, namespace, uid
	attempt        uint32
}

func (d *dockerPop) create(t *testing.T, c context.Context, m *made, cmd []string, restart string) {
	t.Helper()
	dl := map[string]string{"io.kubernetes.docker.type": m.kind}
	for k, v := range m.labels {
		dl[k] = v
	}
	for k, v := range m.annotations {
		dl["annotation."+k] = v
	}
	if m.kind == "container" {
		dl["io.kubernetes.sandbox.id"] = m.sandboxID
		dl["io.kubernetes.container.logpath"] = "/var/log/pods/" + m.md[2] + "_" + m.md[1] + "_" + m.md[3] + "/" + m.md[0] + "/0.log"
	} else {
		dl["io.kubernetes.container.name"] = "POD"
	}
	cfg := &container.Config{Image: testenv.Image, Labels: dl, Cmd: cmd}
	hc := &container.HostConfig{NetworkMode: "none"}
	if restart != "" {
		hc.RestartPolicy = container.RestartPolicy{Name: container.RestartPolicyMode(restart)}
	}
	resp, err := dockerd.API.ContainerCreate(c, cfg, hc, &network.NetworkingConfig{}, nil, m.name)
	if err != nil {
		t.Fatalf("create %s: %v", m.name, err)
	}
	m.id = resp.ID
	d.made = append(d.made, m)
}

type dockerPop struct{ made []*made }

func kubeLabels(pod, ns, uid, ctr string) map[string]string {
	l := map[string]string{"io.kubernetes.pod.name": pod, "io.kubernetes.pod.namespace": ns, "io.kubernetes.pod.uid": uid}
	if ctr != "" {
		l["io.kubernetes.container.name"] = ctr
	}
	return l
}

// populateDocker creates, as cri-dockerd would name and label them, pods
// with created, running, paused, restarting, exited and dead containers,
// plus a few plain Docker containers the kubelet never sees.
func populateDocker(t *testing.T) *dockerPop {
	c := ctx(t, 3*time.Minute)
	api := dockerd.API
	d := &dockerPop{}
	start := func(id string) {
		if err := api.ContainerStart(c, id, container.StartOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A finished pod whose sandbox exited: notready.
	pod, uid, ns := "cron-29218680-tzdzg", "0f3c1a2b-9999-4a4a-8b8b-000000000009", "batch-jobs"
	sb := &made{kind: "podsandbox", name: fmt.Sprintf("k8s_POD_%s_%s_%s_0", pod, ns, uid), md: [4]string{"POD", pod, ns, uid}, labels: kubeLabels(pod, ns, uid, "")}
	d.create(t, c, sb, []string{"/bin/true"}, "")
	start(sb.id)
	api.ContainerWait(c, sb.id, container.WaitConditionNotRunning)
	dead := &made{kind: "container", name: fmt.Sprintf("k8s_worker_%s_%s_%s_0", pod, ns, uid), md: [4]string{"worker", pod, ns, uid},
		sandboxID: sb.id, labels: kubeLabels(pod, ns, uid, "worker"), annotations: map[string]string{"io.kubernetes.container.restartCount": "0"}}
	d.create(t, c, dead, []string{"/bin/true"}, "")
	start(dead.id)
	api.ContainerWait(c, dead.id, container.WaitConditionNotRunning)
	if err := dockerd.MakeDead(c, dead.id); err != nil {
		t.Fatal(err)
	}
	// Docker lists a failed removal as dead once it reloads its state; the
	// restart stops every container, so the rest is made afterwards.
	if err := dockerd.Restart(); err != nil {
		t.Fatal(err)
	}
	for i, ns := range []string{"default", "batch-jobs"} {
		pod, uid := fmt.Sprintf("web-%d", i), fmt.Sprintf("0f3c1a2b-%04d-4a4a-8b8b-00000000000%d", i, i)
		sb := &made{kind: "podsandbox", name: fmt.Sprintf("k8s_POD_%s_%s_%s_0", pod, ns, uid), md: [4]string{"POD", pod, ns, uid},
			labels: kubeLabels(pod, ns, uid, ""), annotations: map[string]string{"kubernetes.io/config.source": "api"}}
		d.create(t, c, sb, nil, "")
		start(sb.id)
		ctr := func(name string, attempt uint32, cmd []string, restart string) *made {
			m := &made{kind: "container", name: fmt.Sprintf("k8s_%s_%s_%s_%s_%d", name, pod, ns, uid, attempt), md: [4]string{name, pod, ns, uid},
				attempt: attempt, sandboxID: sb.id, labels: kubeLabels(pod, ns, uid, name),
				annotations: map[string]string{"io.kubernetes.container.hash": "5f1e3a2b", "io.kubernetes.container.restartCount": fmt.Sprint(attempt),
					"io.kubernetes.container.terminationMessagePath": "/dev/termination-log", "io.kubernetes.container.terminationMessagePolicy": "File"}}
			d.create(t, c, m, cmd, restart)
			return m
		}
		running := ctr("app", 0, nil, "")
		start(running.id)
		paused := ctr("sidecar", 0, nil, "")
		start(paused.id)
		if err := api.ContainerPause(c, paused.id); err != nil {
			t.Fatal(err)
		}
		ctr("init", 0, nil, "") // created, never started
		for a := uint32(0); a < 3; a++ {
			ex := ctr("job", a, []string{"/bin/true"}, "")
			start(ex.id)
			api.ContainerWait(c, ex.id, container.WaitConditionNotRunning)
		}
		crash := ctr("crashloop", 0, []string{"/bin/false"}, "always")
		start(crash.id)
	}
	// Plain Docker containers: counted by Docker state, invisible to the kubelet.
	for _, name := range []string{"registry", "buildkit"} {
		resp, err := api.ContainerCreate(c, &container.Config{Image: testenv.Image}, &container.HostConfig{NetworkMode: "none"}, nil, nil, name)
		if err != nil {
			t.Fatal(err)
		}
		start(resp.ID)
	}
	return d
}

// dockerPS is the truth as `docker ps -a` prints it: id → State, Status.
func dockerPS(t *testing.T) map[string][2]string {
	t.Helper()
	out, err := exec.Command("docker", "-H", dockerd.Endpoint(), "ps", "-a", "--no-trunc", "--format", "{{.ID}}\t{{.State}}\t{{.Status}}").Output()
	if err != nil {
		t.Fatalf("docker ps -a: %v", err)
	}
	res := map[string][2]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.SplitN(line, "\t", 3)
		if len(f) == 3 {
			res[f[0]] = [2]string{f[1], f[2]}
		} else if len(f) == 2 {
			res[f[0]] = [2]string{f[1], ""}
		}
	}
	return res
}

func TestDockerStatesAndCRIView(t *testing.T) {
	need(t, dockErr)
	if _, err := exec.LookPath("docker"); err != nil {
		t.Fatal("docker CLI missing (package docker.io)")
	}
	pop := populateDocker(t)
	client, err := docker.New(docker.Config{Host: dockerd.Endpoint(), Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c := ctx(t, 2*time.Minute)

	// The crash-looping containers flip between running and restarting:
	// compare only when the truth is the same before and after the relist.
	var snap *kubecontainer.Snapshot
	var ps map[string][2]string
	for try := 0; ; try++ {
		before := dockerPS(t)
		snap = client.Relist(c)
		ps = dockerPS(t)
		if fmt.Sprint(before) == fmt.Sprint(ps) {
			break
		}
		if try == 50 {
			t.Fatal("docker ps -a never stable across a relist")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if snap.Err != nil {
		t.Fatal(snap.Err)
	}
	wantDocker := map[string]int{}
	for _, s := range kubecontainer.DockerStates {
		wantDocker[s] = 0
	}
	for _, v := range ps {
		wantDocker[v[0]]++
	}
	for s, n := range wantDocker {
		if snap.DockerContainers[s] != n {
			t.Errorf("pleg_docker_containers{state=%q} = %d, docker ps -a says %d", s, snap.DockerContainers[s], n)
		}
	}
	if wantDocker["dead"] != 1 || wantDocker["paused"] != 2 || wantDocker["created"] != 2 {
		t.Errorf("population is not what the harness made: %v", wantDocker)
	}

	// The CRI view, rebuilt from what the harness created and from docker
	// ps's Status column, by cri-dockerd's rules.
	wantCT := map[string]int{"created": 0, "running": 0, "exited": 0, "unknown": 0}
	wantSB := map[string]int{"ready": 0, "notready": 0}
	var estimate, sbEstimate int64
	for _, m := range pop.made {
		st := ps[m.id][1]
		info, err := dockerd.API.ContainerInspect(c, m.id)
		if err != nil {
			t.Fatal(err)
		}
		created, _ := time.Parse(time.RFC3339Nano, info.Created)
		if m.kind == "podsandbox" {
			state := runtimeapi.PodSandboxState_SANDBOX_NOTREADY
			if strings.HasPrefix(st, "Up") {
				state = runtimeapi.PodSandboxState_SANDBOX_READY
			}
			wantSB[kubecontainer.SandboxStateName(state)]++
			sbEstimate += elem(&runtimeapi.PodSandbox{
				Id:          m.id,
				Metadata:    &runtimeapi.PodSandboxMetadata{Name: m.md[1], Namespace: m.md[2], Uid: m.md[3], Attempt: m.attempt},
				State:       state,
				CreatedAt:   created.Unix() * int64(time.Second),
				Labels:      m.labels,
				Annotations: m.annotations,
			})
			continue
		}
		var state runtimeapi.ContainerState
		switch {
		case strings.HasPrefix(st, "Up"):
			state = runtimeapi.ContainerState_CONTAINER_RUNNING
		case strings.HasPrefix(st, "Exited"):
			state = runtimeapi.ContainerState_CONTAINER_EXITED
		case strings.HasPrefix(st, "Created"):
			state = runtimeapi.ContainerState_CONTAINER_CREATED
		default:
			state = runtimeapi.ContainerState_CONTAINER_UNKNOWN
		}
		wantCT[kubecontainer.ContainerStateName(state)]++
		msg := &runtimeapi.Container{
			Id: m.id, PodSandboxId: m.sandboxID,
			Metadata:    &runtimeapi.ContainerMetadata{Name: m.md[0], Attempt: m.attempt},
			Image:       &runtimeapi.ImageSpec{Image: info.Config.Image},
			ImageRef:    info.Image,
			State:       state,
			CreatedAt:   created.Unix() * int64(time.Second),
			Labels:      m.labels,
			Annotations: m.annotations,
		}
		estimate += elem(msg)
	}
	for s, n := range wantCT {
		if snap.Containers[s] != n {
			t.Errorf("pleg_containers{state=%q} = %d, cri-dockerd would report %d", s, snap.Containers[s], n)
		}
	}
	for s, n := range wantSB {
		if snap.Sandboxes[s] != n {
			t.Errorf("pleg_sandboxes{state=%q} = %d, cri-dockerd would report %d", s, snap.Sandboxes[s], n)
		}
	}
	got := snap.RPCs[kubecontainer.RPCListContainers].PayloadBytes
	diff := math.Abs(float64(got-estimate)) / float64(estimate) * 100
	if diff > 5 {
		t.Errorf("payload estimate %d B is %.2f%% off the independently built %d B", got, diff, estimate)
	}
	gotSB := snap.RPCs[kubecontainer.RPCListPodSandbox].PayloadBytes
	sbDiff := math.Abs(float64(gotSB-sbEstimate)) / float64(sbEstimate) * 100
	if sbDiff > 5 {
		t.Errorf("sandbox payload estimate %d B is %.2f%% off the independently built %d B", gotSB, sbDiff, sbEstimate)
	}
	t.Logf("sandbox estimate %d B vs independent %d B (%.2f%% off)", gotSB, sbEstimate, sbDiff)
	keys := make([]string, 0, len(wantDocker))
	for k := range wantDocker {
		keys = append(keys, fmt.Sprintf("%s=%d", k, wantDocker[k]))
	}
	sort.Strings(keys)
	t.Logf("docker ps -a: %s; CRI view containers %v sandboxes %v; estimate %d B vs independent %d B (%.2f%% off)",
		strings.Join(keys, " "), snap.Containers, snap.Sandboxes, got, estimate, diff)
}

func TestDockerReadOnly(t *testing.T) {
	need(t, dockErr)
	c := ctx(t, time.Minute)
	client, err := docker.New(docker.Config{Host: dockerd.Endpoint(), Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	before, err := dockerd.API.ContainerList(c, container.ListOptions{All: true})
	if err != nil || len(before) == 0 {
		t.Fatalf("no containers to protect: %v", err)
	}
	// The exporter keeps the moby client behind a read-only interface and
	// no longer hands it out: runtime/docker's TestReadOnlyAgainstDockerd
	// attacks the client underneath (attach, exec, upgrades, writes). Here:
	// everything the exporter's client does leaves the daemon as it was.
	if _, err := client.Info(c); err != nil {
		t.Errorf("info through the exporter's client: %v", err)
	}
	if snap := client.Relist(c); snap.Err != nil {
		t.Errorf("relist through the exporter's client: %v", snap.Err)
	}
	if _, err := client.Inventory(c); err != nil {
		t.Errorf("inventory through the exporter's client: %v", err)
	}
	after, err := dockerd.API.ContainerList(c, container.ListOptions{All: true})
	if err != nil || len(after) != len(before) {
		t.Errorf("containers before %d, after %d (%v)", len(before), len(after), err)
	}
}
