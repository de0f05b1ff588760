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
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/pleg-exporter/pleg_exporter/runtime/docker"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// statusPod makes one pod as cri-dockerd names and labels it: an exited
// sandbox of attempt 0, a running one of attempt 1, and in the newer one a
// running container and an exited one. Everything it makes is removed when
// the test ends: the other Docker tests count the daemon's containers.
func statusPod(t *testing.T, c context.Context, pod, ns, uid string) (sandboxes []*made, containers []*made) {
	t.Helper()
	d := &dockerPop{}
	t.Cleanup(func() {
		rc, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, m := range d.made {
			dockerd.API.ContainerRemove(rc, m.id, container.RemoveOptions{Force: true})
		}
	})
	start := func(id string) {
		if err := dockerd.API.ContainerStart(c, id, container.StartOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for attempt, cmd := range [][]string{{"/bin/true"}, nil} {
		sb := &made{kind: "podsandbox", name: fmt.Sprintf("k8s_POD_%s_%s_%s_%d", pod, ns, uid, attempt), md: [4]string{"POD", pod, ns, uid},
			attempt: uint32(attempt), labels: kubeLabels(pod, ns, uid, ""), annotations: map[string]string{"kubernetes.io/config.source": "api"}}
		d.create(t, c, sb, cmd, "")
		start(sb.id)
		if cmd != nil {
			dockerd.API.ContainerWait(c, sb.id, container.WaitConditionNotRunning)
		}
		sandboxes = append(sandboxes, sb)
		// Docker's creation times are whole seconds in its list: the
		// kubelet's newest-first order needs them apart.
		time.Sleep(1100 * time.Millisecond)
	}
	sb := sandboxes[1]
	for _, ct := range []struct {
		name string
		cmd  []string
	}{{"app", nil}, {"migrate", []string{"/bin/true"}}} {
		m := &made{kind: "container", name: fmt.Sprintf("k8s_%s_%s_%s_%s_0", ct.name, pod, ns, uid), md: [4]string{ct.name, pod, ns, uid},
			sandboxID: sb.id, labels: kubeLabels(pod, ns, uid, ct.name), annotations: map[string]string{"io.kubernetes.container.restartCount": "0"}}
		d.create(t, c, m, ct.cmd, "")
		start(m.id)
		if ct.cmd != nil {
			dockerd.API.ContainerWait(c, m.id, container.WaitConditionNotRunning)
		}
		containers = append(containers, m)
	}
	return sandboxes, containers
}

func rpcs(ins kubecontainer.PodInspection) string {
	var out []string
	for _, c := range ins.Calls {
		s := c.RPC
		if c.ID != "" {
			s += " " + c.ID[:12]
		}
		if c.Err != nil {
			s += " " + kubecontainer.ErrorCode(c.Err)
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

// dockerOrder is the order Docker lists the pod's containers in, asked
// with the harness's own client.
func dockerOrder(t *testing.T, c context.Context, uid string) []string {
	t.Helper()
	list, err := dockerd.API.ContainerList(c, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", "io.kubernetes.docker.type=container"), filters.Arg("label", "io.kubernetes.pod.uid="+uid))})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range list {
		ids = append(ids, s.ID)
	}
	return ids
}

func TestDockerStatus(t *testing.T) {
	need(t, dockErr)
	c := ctx(t, 3*time.Minute)
	client, err := docker.New(docker.Config{Host: dockerd.Endpoint(), Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	t.Run("pod", func(t *testing.T) {
		pod, ns, uid := "shop-0", "status-a", "5a7a0000-0000-4000-8000-00000000000a"
		sbs, cts := statusPod(t, c, pod, ns, uid)
		// A second pod beside it: the filters must keep it out.
		statusPod(t, c, "shop-1", ns, "5a7a0000-0000-4000-8000-00000000000b")
		var began, ended []string
		ins := client.InspectPod(c, uid, kubecontainer.CallTracker{
			Begin: func(rpc, id string) { began = append(began, rpc+" "+id) },
			End:   func(sc kubecontainer.StatusCall) { ended = append(ended, sc.RPC+" "+sc.ID) },
		})
		if ins.Err != nil {
			t.Fatalf("inspection: %v (calls %s)", ins.Err, rpcs(ins))
		}
		order := dockerOrder(t, c, uid)
		if len(order) != len(cts) {
			t.Fatalf("docker lists %d containers of the pod, the harness made %d", len(order), len(cts))
		}
		want := []string{"ListPodSandbox", "PodSandboxStatus " + sbs[1].id[:12], "PodSandboxStatus " + sbs[0].id[:12], "ListContainers"}
		for _, id := range order {
			want = append(want, "ContainerStatus "+id[:12])
		}
		if got := rpcs(ins); got != strings.Join(want, ", ") {
			t.Errorf("calls\n%s\nwant\n%s", got, strings.Join(want, ", "))
		}
		if fmt.Sprint(ins.Sandboxes) != fmt.Sprint([]string{sbs[1].id, sbs[0].id}) || fmt.Sprint(ins.Containers) != fmt.Sprint(order) {
			t.Errorf("sandboxes %v, containers %v", ins.Sandboxes, ins.Containers)
		}
		if ins.Name != pod || ins.Namespace != ns || ins.UID != uid {
			t.Errorf("pod %s/%s (%s)", ins.Namespace, ins.Name, ins.UID)
		}
		if len(began) != len(ins.Calls) || fmt.Sprint(began) != fmt.Sprint(ended) {
			t.Errorf("tracker: began %v, ended %v", began, ended)
		}
		t.Logf("%s in %v", rpcs(ins), ins.Duration)
	})

	// Items removed between the list and their status call are Docker's
	// 404, the kubelet's NotFound: skipped, and the inspection goes on.
	t.Run("removed mid-way", func(t *testing.T) {
		pod, ns, uid := "shop-2", "status-b", "5a7a0000-0000-4000-8000-00000000000c"
		sbs, cts := statusPod(t, c, pod, ns, uid)
		remove := func(id string) {
			if err := dockerd.API.ContainerRemove(c, id, container.RemoveOptions{Force: true}); err != nil {
				t.Errorf("remove %s: %v", id, err)
			}
		}
		var gone string
		ins := client.InspectPod(c, uid, kubecontainer.CallTracker{End: func(sc kubecontainer.StatusCall) {
			switch sc.RPC {
			case kubecontainer.RPCListPodSandbox:
				remove(sbs[1].id) // the newest, inspected first
			case kubecontainer.RPCListContainers:
				gone = dockerOrder(t, c, uid)[0]
				remove(gone)
			}
		}})
		if ins.Err != nil {
			t.Fatalf("inspection: %v (calls %s)", ins.Err, rpcs(ins))
		}
		want := []string{"ListPodSandbox", "PodSandboxStatus " + sbs[1].id[:12] + " NotFound", "PodSandboxStatus " + sbs[0].id[:12], "ListContainers"}
		for _, id := range ins.Containers {
			s := "ContainerStatus " + id[:12]
			if id == gone {
				s += " NotFound"
			}
			want = append(want, s)
		}
		if got := rpcs(ins); got != strings.Join(want, ", ") || len(ins.Containers) != len(cts) {
			t.Errorf("calls\n%s\nwant\n%s", got, strings.Join(want, ", "))
		}
		if ins.Name != pod || ins.Namespace != ns {
			t.Errorf("pod %s/%s", ins.Namespace, ins.Name)
		}
		for _, sc := range ins.Calls {
			if sc.Err != nil {
				t.Logf("%s %s: %v", sc.RPC, sc.ID[:12], sc.Err)
			}
		}
	})

	// A pod Docker never had: two empty lists, nothing else.
	t.Run("unknown pod", func(t *testing.T) {
		ins := client.InspectPod(c, "5a7a0000-0000-4000-8000-0000000000ff", kubecontainer.CallTracker{})
		if ins.Err != nil || rpcs(ins) != "ListPodSandbox, ListContainers" || ins.Name != "" {
			t.Errorf("err %v, calls %s, name %q", ins.Err, rpcs(ins), ins.Name)
		}
	})
}
