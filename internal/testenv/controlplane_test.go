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

package testenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func requireControlPlane(t *testing.T) ControlPlaneBinaries {
	t.Helper()
	bins, err := FindControlPlane()
	if err == nil {
		err = Check()
	}
	if err != nil {
		if os.Getenv("CI") != "" || !errors.Is(err, ErrUnavailable) {
			t.Fatal(err)
		}
		t.Skipf("skipping: %v", err)
	}
	return bins
}

// The control plane the cluster tests run: it starts on loopback, its
// authorizers are the ones a real cluster has (a node may read nodes but
// not secrets; the admin may), its controllers act (a Deployment becomes a
// ReplicaSet and a Pod, which the scheduler tries to place and reports it
// cannot: no node), and Stop leaves no process, record or directory.
func TestControlPlane(t *testing.T) {
	bins := requireControlPlane(t)
	dir := filepath.Join(t.TempDir(), "cp")
	start := time.Now()
	cp, err := StartControlPlane(dir, bins)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("control plane ready in %v at %s", time.Since(start).Round(time.Millisecond), cp.Server)
	stopped := false
	defer func() {
		if !stopped {
			cp.Stop()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	out, err := cp.Kubectl(ctx, "version", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Server struct{ GitVersion string } `json:"serverVersion"`
	}
	if err := json.Unmarshal(out, &v); err != nil || v.Server.GitVersion != KubeletVersion {
		t.Errorf("server version %q (%v), want %s", v.Server.GitVersion, err, KubeletVersion)
	}

	node, err := cp.NodeKubeconfig("cp-test-node")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		kubeconfig string
		verb, res  string
		want       string
	}{
		{node, "get", "node/cp-test-node", "yes"}, // its own Node: the Node authorizer
		{node, "get", "node/other-node", "no"},
		{node, "list", "secrets", "no"},
		{node, "delete", "namespaces", "no"},
		{cp.AdminKubeconfig, "list", "secrets", "yes"},
	} {
		out, _ := cp.KubectlAs(ctx, c.kubeconfig, "auth", "can-i", c.verb, c.res, "--all-namespaces")
		if got, _, _ := strings.Cut(strings.TrimSpace(string(out)), " "); got != c.want {
			t.Errorf("%s: can-i %s %s = %q, want %q", filepath.Base(c.kubeconfig), c.verb, c.res, got, c.want)
		}
	}

	if _, err := cp.Kubectl(ctx, "create", "deployment", "cp-test", "--image=pleg-test:none"); err != nil {
		t.Fatal(err)
	}
	reason := waitPod(ctx, t, cp, "app=cp-test")
	if !strings.Contains(reason, "no nodes available") {
		t.Errorf("the pod's scheduling condition says %q, want the scheduler's \"no nodes available\"", reason)
	}

	var records []string
	for _, d := range cp.daemons {
		records = append(records, d.ledger.path)
	}
	pids := cp.pids()
	if t.Failed() {
		t.Log(cp.Logs(20))
	}
	if err := cp.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped = true
	for _, p := range pids {
		if runs(p) {
			t.Errorf("pid %d still runs after Stop", p)
		}
	}
	for _, r := range append(records, dir) {
		if _, err := os.Stat(r); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there after Stop (%v)", r, err)
		}
	}
}

// waitPod waits until the controllers made a pod with the label and the
// scheduler set its PodScheduled condition, and returns its message.
func waitPod(ctx context.Context, t *testing.T, cp *ControlPlane, selector string) string {
	t.Helper()
	for {
		out, err := cp.Kubectl(ctx, "get", "pods", "-l", selector, "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var pods corev1.PodList
		if err := json.Unmarshal(out, &pods); err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
					return c.Message
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no pod %s with a PodScheduled condition: %d pods", selector, len(pods.Items))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (cp *ControlPlane) pids() []int {
	var out []int
	for _, d := range cp.daemons {
		out = append(out, d.cmd.Process.Pid)
	}
	return out
}

// A run killed with the control plane up leaves its records; the next
// run's CleanLeftovers stops every daemon and removes its directory.
func TestControlPlaneKilledRun(t *testing.T) {
	bins := requireControlPlane(t)
	if dir := os.Getenv("PLEG_TEST_KILLED_RUN"); dir != "" {
		// The child: start and wait to be killed.
		cp, err := StartControlPlane(dir, bins)
		if err != nil {
			fmt.Printf("FAILED %v\n", err)
			os.Exit(1)
		}
		fmt.Printf("READY %v\n", cp.pids())
		time.Sleep(time.Hour)
	}
	dir := filepath.Join(t.TempDir(), "cp")
	line := killedChild(t, "TestControlPlaneKilledRun", "PLEG_TEST_KILLED_RUN="+dir)
	var pids []int
	for _, f := range strings.Fields(strings.Trim(line, "[]")) {
		var p int
		fmt.Sscan(f, &p)
		if syscall.Kill(p, 0) != nil {
			t.Fatalf("pid %d died with the test process: nothing is left to clean", p)
		}
		pids = append(pids, p)
	}
	if len(pids) != 4 {
		t.Fatalf("the killed run reported %q, want 4 daemons", line)
	}
	done, err := CleanLeftovers()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("CleanLeftovers: %s", strings.Join(done, "; "))
	if len(done) != 4 {
		t.Errorf("CleanLeftovers removed %d records, want 4", len(done))
	}
	for _, p := range pids {
		if runs(p) {
			t.Errorf("pid %d of the killed run still runs", p)
		}
	}
	for _, sub := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if _, err := os.Stat(filepath.Join(dir, sub)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s of the killed run is still there (%v)", sub, err)
		}
	}
}

// runs reports whether pid is a process that has not exited (an orphan
// that exited may wait as a zombie for its new parent to reap it).
func runs(pid int) bool {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(st), ") Z ")
}
