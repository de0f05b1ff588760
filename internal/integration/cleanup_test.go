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
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/diagnose"
	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
	"github.com/pleg-exporter/pleg_exporter/runtime/detect"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// crictlPath is cri-tools' crictl, built pinned by make test (CRICTL).
func crictlPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CRICTL"); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("crictl"); err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatal("crictl not found: make test builds it (set CRICTL)")
	}
	t.Skip("crictl not found: make test builds it (set CRICTL)")
	return ""
}

type stateCounts struct{ containers, sandboxes map[string]int }

func countStates(t *testing.T, c context.Context, rs runtimeapi.RuntimeServiceClient) stateCounts {
	t.Helper()
	sc := stateCounts{containers: map[string]int{}, sandboxes: map[string]int{}}
	cs, err := rs.ListContainers(c, &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ct := range cs.Containers {
		sc.containers[kubecontainer.ContainerStateName(ct.State)]++
	}
	ss, err := rs.ListPodSandbox(c, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ss.Items {
		sc.sandboxes[kubecontainer.SandboxStateName(s.State)]++
	}
	return sc
}

// The cleanup that diagnose prints must work where it is needed: past the
// limit, where crictl's own unfiltered list fails like the kubelet's. On a
// containerd of its own (the commands remove every exited container), the
// report is built with a limit below the exited containers' list, so it
// takes the per-namespace path; then every crictl command it printed runs
// through bash with the real crictl. Exited containers and notready
// sandboxes must be gone, and nothing else touched.
func TestDiagnoseCleanupRunsOnContainerd(t *testing.T) {
	need(t, ctdErr)
	crictl := crictlPath(t)
	own, err := testenv.StartContainerd(filepath.Join(workRoot, "cleanup"))
	if err != nil {
		t.Fatal(err)
	}
	defer own.Stop()
	cc, err := own.Dial(256 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	k := &testenv.PodClient{RS: runtimeapi.NewRuntimeServiceClient(cc), LogDir: filepath.Join(workRoot, "cleanup-pods")}
	c := ctx(t, 3*time.Minute)

	if err := testenv.SmallPopulation(c, k); err != nil {
		t.Fatal(err)
	}
	pod, err := k.RunPod(c, "ci", "build-7f9c")
	if err != nil {
		t.Fatal(err)
	}
	for a := uint32(0); a < 4; a++ {
		if _, err := k.CreateContainer(c, pod, testenv.ContainerSpec{Name: "step", Attempt: a, Command: []string{"/bin/true"}, Start: true}); err != nil {
			t.Fatal(err)
		}
	}
	// Every started /bin/true has exited before the report is built.
	var before stateCounts
	for {
		before = countStates(t, c, k.RS)
		if before.containers[kubecontainer.ContainerExited] == 10 {
			break
		}
		if c.Err() != nil {
			t.Fatalf("waiting for 10 exited containers: %v", before.containers)
		}
		time.Sleep(100 * time.Millisecond)
	}

	cfg := detect.Config{Kind: detect.KindCRI, Endpoint: own.Endpoint(), MaxRecvBytes: 256 << 20, Timeout: time.Minute}
	rt, err := detect.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	inv, err := rt.Inventory(c)
	if err != nil {
		t.Fatal(err)
	}
	var total, largest int64
	perNS := map[string]int64{}
	for _, ct := range inv.Containers {
		if ct.State == kubecontainer.ContainerExited {
			total += ct.Bytes
			perNS[ct.Namespace] += ct.Bytes
			largest = max(largest, perNS[ct.Namespace])
		}
	}
	// A limit the exited list passes while each namespace's stays under
	// the 90 % crictl margin: this node, scaled down, is past the limit.
	th := diagnose.DefaultThresholds
	th.LimitBytes = int64((float64(total) + float64(largest)) / 2 / 0.9)
	r := diagnose.Build(inv, th, time.Now())

	env := append(os.Environ(), "CONTAINER_RUNTIME_ENDPOINT="+own.Endpoint(), "IMAGE_SERVICE_ENDPOINT="+own.Endpoint(),
		"PATH="+filepath.Dir(crictl)+":"+os.Getenv("PATH"))
	var ran []string
	for _, s := range r.Cleanup {
		if !strings.HasPrefix(s.Command, "crictl ") {
			continue // kubectl and diagnose itself: nothing to run here
		}
		cmd := exec.CommandContext(c, "bash", "-o", "pipefail", "-c", s.Command)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", s.Command, err, out)
		}
		ran = append(ran, s.Command)
	}
	perNamespace := 0
	for _, cmd := range ran {
		if strings.Contains(cmd, "--label io.kubernetes.pod.namespace=") {
			perNamespace++
		}
	}
	if perNamespace < 2 || strings.Contains(strings.Join(ran, "\n"), "--state exited -q") {
		t.Fatalf("the report did not take the per-namespace path (limit %d B, exited list %d B):\n%s", th.LimitBytes, total, strings.Join(ran, "\n"))
	}

	after := countStates(t, c, k.RS)
	if after.containers[kubecontainer.ContainerExited] != 0 || after.sandboxes[kubecontainer.SandboxNotReady] != 0 {
		t.Errorf("after the cleanup: exited %d, notready %d; want none\n%s", after.containers[kubecontainer.ContainerExited],
			after.sandboxes[kubecontainer.SandboxNotReady], strings.Join(ran, "\n"))
	}
	for _, s := range []string{kubecontainer.ContainerRunning, kubecontainer.ContainerCreated} {
		if after.containers[s] != before.containers[s] {
			t.Errorf("%s containers %d → %d: the cleanup touched what it should not", s, before.containers[s], after.containers[s])
		}
	}
	if after.sandboxes[kubecontainer.SandboxReady] != before.sandboxes[kubecontainer.SandboxReady] {
		t.Errorf("ready sandboxes %d → %d", before.sandboxes[kubecontainer.SandboxReady], after.sandboxes[kubecontainer.SandboxReady])
	}
	t.Logf("cleanup on containerd: %d crictl commands (%d per namespace, exited list %d B against a %d B limit); exited %d → 0, notready %d → 0; running %d, created %d, ready %d untouched",
		len(ran), perNamespace, total, th.LimitBytes, before.containers[kubecontainer.ContainerExited], before.sandboxes[kubecontainer.SandboxNotReady],
		after.containers[kubecontainer.ContainerRunning], after.containers[kubecontainer.ContainerCreated], after.sandboxes[kubecontainer.SandboxReady])
}
