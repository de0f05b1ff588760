package diagnose

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

var now = time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)

func inventory() *kubecontainer.Inventory {
	inv := &kubecontainer.Inventory{Info: kubecontainer.Info{Runtime: "containerd", Version: "1.7.24", Endpoint: "unix:///run/containerd/containerd.sock"}, View: kubecontainer.ViewCRI,
		Payload: map[string]int64{kubecontainer.RPCListContainers: 15 << 20, kubecontainer.RPCListPodSandbox: 1 << 20}}
	add := func(ns, pod, state string, n int, bytes int64) {
		for i := 0; i < n; i++ {
			inv.Containers = append(inv.Containers, kubecontainer.Container{ID: strings.Repeat("c", 60) + string(rune('a'+len(inv.Containers)%26)), Name: "w", Pod: pod, Namespace: ns, State: state, CreatedAt: now.Add(-time.Hour), Bytes: bytes})
		}
	}
	add("batch-jobs", "cron-1", kubecontainer.ContainerExited, 5000, 2000)
	add("batch-jobs", "cron-2", kubecontainer.ContainerExited, 1000, 2000)
	add("default", "web-1", kubecontainer.ContainerRunning, 10, 1000)
	add("ci", "build-1", kubecontainer.ContainerUnknown, 2, 1000)
	inv.Sandboxes = []kubecontainer.Sandbox{
		{ID: "s1", Pod: "cron-1", Namespace: "batch-jobs", State: kubecontainer.SandboxNotReady, CreatedAt: now.Add(-48 * time.Hour)},
		{ID: "s2", Pod: "web-1", Namespace: "default", State: kubecontainer.SandboxReady, CreatedAt: now.Add(-time.Hour)},
	}
	inv.Probes = []kubecontainer.ProbeResult{
		{Kind: kubecontainer.ProbeSandbox, ID: "s1", Duration: 5 * time.Second, TimedOut: true, Err: errors.New("context deadline exceeded")},
		{Kind: kubecontainer.ProbeContainer, ID: inv.Containers[6010].ID, Duration: 3 * time.Millisecond},
	}
	return inv
}

func TestBuildNamesCulpritsAndCleanup(t *testing.T) {
	r := Build(inventory(), DefaultThresholds, now)
	if !r.AtRisk || len(r.Reasons) != 3 {
		t.Fatalf("at risk %v, reasons %q (want payload, exited pile-up, probe timeout)", r.AtRisk, r.Reasons)
	}
	if r.Namespaces[0].Name != "batch-jobs" || r.Namespaces[0].Containers != 6000 || r.NSBytes[0].Name != "batch-jobs" {
		t.Errorf("top namespace %+v", r.Namespaces[0])
	}
	if r.Pods[0].Name != "batch-jobs/cron-1" || r.Pods[0].Containers != 5000 {
		t.Errorf("top pod %+v", r.Pods[0])
	}
	if r.Containers[kubecontainer.ContainerExited] != 6000 || r.Sandboxes[kubecontainer.SandboxNotReady] != 1 || len(r.Suspects) != 2 {
		t.Errorf("counts %v %v suspects %d", r.Containers, r.Sandboxes, len(r.Suspects))
	}
	if r.Probes[0].Result != "TIMED OUT" || r.Probes[0].Where != "batch-jobs/cron-1" {
		t.Errorf("slowest probe %+v", r.Probes[0])
	}
	// 15 MiB used, 1 MiB left, 2.6 KB average: ~400 more fit.
	for _, p := range r.Payload {
		if p.RPC == kubecontainer.RPCListContainers && (p.MoreFit < 350 || p.MoreFit > 450) {
			t.Errorf("more fit %d", p.MoreFit)
		}
	}
	var cmds []string
	for _, s := range r.Cleanup {
		cmds = append(cmds, s.Command)
	}
	all := strings.Join(cmds, "\n")
	for _, want := range []string{"kubectl cordon NODE", "crictl ps -a --state exited -q | xargs -r -n 100 crictl rm", "crictl rm -f " + inventory().Containers[6010].ID, "crictl pods --state notready -q | xargs -r -n 100 crictl rmp", "kubectl -n batch-jobs get jobs,cronjobs,pods", "kubectl uncordon NODE"} {
		if !strings.Contains(all, want) {
			t.Errorf("cleanup lacks %q:\n%s", want, all)
		}
	}
	if !strings.HasPrefix(cmds[0], "kubectl cordon") {
		t.Error("cordon must come first")
	}
	var buf bytes.Buffer
	if err := r.JSON(&buf); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || back.Namespaces[0].Name != "batch-jobs" {
		t.Errorf("json: %v", err)
	}
	buf.Reset()
	r.Text(&buf)
	for _, want := range []string{"AT RISK", "Top namespaces by containers", "batch-jobs", "TIMED OUT", "Cleanup"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("text report lacks %q", want)
		}
	}
}

func TestBuildDockerCleanupAndHealthy(t *testing.T) {
	inv := &kubecontainer.Inventory{View: kubecontainer.ViewDocker, Payload: map[string]int64{kubecontainer.RPCListContainers: 10000}}
	inv.Containers = []kubecontainer.Container{
		{ID: "d1", Namespace: "default", Pod: "p", State: kubecontainer.ContainerUnknown, DockerState: "dead"},
		{ID: "d2", State: "docker-only", DockerState: "running"},
	}
	r := Build(inv, DefaultThresholds, now)
	if !r.AtRisk || r.Docker["dead"] != 1 || r.Containers[kubecontainer.ContainerUnknown] != 1 || r.Containers[kubecontainer.ContainerRunning] != 0 {
		t.Fatalf("%+v", r)
	}
	var cmds []string
	for _, s := range r.Cleanup {
		cmds = append(cmds, s.Command+" "+s.Warning)
	}
	all := strings.Join(cmds, "\n")
	if !strings.Contains(all, "docker rm -f d1") || !strings.Contains(all, "docker system prune") || !strings.Contains(all, "every stopped container") {
		t.Errorf("docker cleanup:\n%s", all)
	}
	inv.Containers = inv.Containers[1:]
	if r := Build(inv, DefaultThresholds, now); r.AtRisk {
		t.Errorf("healthy node at risk: %v", r.Reasons)
	}
}

// Past the limit the plain `crictl ps -a --state exited` fails like the
// kubelet's relist (crictl has the same 16 MiB receive limit): the cleanup
// goes namespace by namespace, and a namespace too large on its own pod by
// pod, every list under the limit, sandboxes first.
func TestCleanupPastTheLimitUsesListsCrictlCanRead(t *testing.T) {
	inv := &kubecontainer.Inventory{Info: kubecontainer.Info{Runtime: "containerd"}, View: kubecontainer.ViewCRI,
		Payload: map[string]int64{kubecontainer.RPCListContainers: 20 << 20, kubecontainer.RPCListPodSandbox: 1 << 20}}
	add := func(ns, pod string, n int, bytes int64) {
		for i := 0; i < n; i++ {
			inv.Containers = append(inv.Containers, kubecontainer.Container{ID: fmt.Sprintf("%064x", len(inv.Containers)), Pod: pod, Namespace: ns,
				State: kubecontainer.ContainerExited, CreatedAt: now.Add(-time.Hour), Bytes: bytes})
		}
	}
	add("batch-jobs", "cron-a", 4000, 2500) // 10 MB
	add("batch-jobs", "cron-b", 3000, 2500) // 7.5 MB: the namespace, 17.5 MB, is over 0.9 x 16 MiB alone
	add("ci", "build-1", 1000, 2000)        // 2 MB
	inv.Sandboxes = []kubecontainer.Sandbox{{ID: "s1", Pod: "cron-a", Namespace: "batch-jobs", State: kubecontainer.SandboxNotReady}}
	r := Build(inv, DefaultThresholds, now)
	var cmds []string
	for _, s := range r.Cleanup {
		cmds = append(cmds, s.Command)
	}
	all := strings.Join(cmds, "\n")
	want := []string{
		"crictl pods --state notready -q | xargs -r -n 100 crictl rmp",
		"crictl ps -a --state exited --label io.kubernetes.pod.namespace=batch-jobs --label io.kubernetes.pod.name=cron-a -q | xargs -r -n 100 crictl rm",
		"crictl ps -a --state exited --label io.kubernetes.pod.namespace=batch-jobs --label io.kubernetes.pod.name=cron-b -q | xargs -r -n 100 crictl rm",
		"crictl ps -a --state exited --label io.kubernetes.pod.namespace=ci -q | xargs -r -n 100 crictl rm",
	}
	last := -1
	for _, w := range want {
		i := strings.Index(all, w)
		if i < 0 {
			t.Fatalf("cleanup lacks %q:\n%s", w, all)
		}
		if i < last {
			t.Errorf("%q out of order (sandboxes first, then the largest lists):\n%s", w, all)
		}
		last = i
	}
	if strings.Contains(all, "crictl ps -a --state exited -q") {
		t.Errorf("the unfiltered exited list (20 MB) cannot be read by crictl:\n%s", all)
	}
	if !strings.Contains(r.Cleanup[2].Why, "too large for crictl") {
		t.Errorf("the first per-namespace step does not say why: %q", r.Cleanup[2].Why)
	}

	// A node with more groups than the report spells out ends with the next
	// diagnose.
	inv.Containers = nil
	for i := 0; i < 40; i++ {
		add(fmt.Sprintf("ns-%02d", i), "p", 400, 1200) // 19.2 MB in all, 0.48 MB each
	}
	r = Build(inv, DefaultThresholds, now)
	lastStep := r.Cleanup[len(r.Cleanup)-2] // before uncordon
	if lastStep.Command != "pleg_exporter diagnose" || !strings.Contains(lastStep.Why, fmt.Sprintf("%d more exited", (40-maxListSteps)*400)) {
		t.Errorf("capped cleanup ends with %+v", lastStep)
	}
}
