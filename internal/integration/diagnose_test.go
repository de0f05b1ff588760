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
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// diagnose on the real containerd: the report's counts and top namespace
// equal what the runtime itself answers.
func TestDiagnoseOnContainerd(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "pleg_exporter")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/pleg_exporter").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	onEachContainerd(t, func(t *testing.T, rt *containerdRuntime) { diagnoseOn(t, bin, rt) })
}

func diagnoseOn(t *testing.T, bin string, rt *containerdRuntime) {
	populate(t, rt)
	c := ctx(t, 2*time.Minute)
	tr := readTruth(t, c, rt)
	list, err := rt.pods.RS.ListContainers(c, &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	perNS := map[string]int{}
	for _, ct := range list.Containers {
		perNS[ct.Labels["io.kubernetes.pod.namespace"]]++
	}
	topNS, topN := "", 0
	for ns, n := range perNS {
		if n > topN || (n == topN && ns < topNS) {
			topNS, topN = ns, n
		}
	}

	var r struct {
		Containers map[string]int `json:"containers"`
		Sandboxes  map[string]int `json:"sandboxes"`
		Namespaces []struct {
			Name       string
			Containers int
		} `json:"top_namespaces_by_containers"`
		NotReady []struct{ ID, Where string }        `json:"notready_sandboxes"`
		Probes   []struct{ Kind, ID, Result string } `json:"slowest_status_calls"`
	}
	diagnoseJSON(t, &r, bin, "diagnose", "--output=json", "--runtime.endpoint="+rt.ctd.Endpoint())
	sameCounts(t, "containers", r.Containers, tr.containers)
	sameCounts(t, "sandboxes", r.Sandboxes, tr.sandboxes)
	if len(r.Namespaces) == 0 || r.Namespaces[0].Name != topNS || r.Namespaces[0].Containers != topN {
		t.Errorf("top namespace %+v, runtime says %s with %d", r.Namespaces, topNS, topN)
	}
	if len(r.NotReady) != tr.sandboxes["notready"] || len(r.Probes) == 0 || r.Probes[0].Kind != "sandbox" || r.Probes[0].Result != "ok" {
		t.Errorf("notready %+v probes %+v", r.NotReady, r.Probes)
	}
	t.Logf("diagnose on containerd %s: top namespace %s with %d containers (runtime: %v); notready %d; probes %d", rt.name, r.Namespaces[0].Name, r.Namespaces[0].Containers, perNS, len(r.NotReady), len(r.Probes))
}

// diagnoseJSON runs a diagnose command line (exit 0 or 1: healthy or at
// risk) and decodes its JSON report into r.
func diagnoseJSON(t *testing.T, r any, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != 0 && code != 1 {
		t.Fatalf("%s: exit %d: %s", strings.Join(args, " "), code, stderr.String())
	}
	if err := json.Unmarshal(out.Bytes(), r); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
}

// sameCounts compares a report's counts by state with the runtime's.
func sameCounts(t *testing.T, what string, got, runtime map[string]int) {
	t.Helper()
	for s, n := range runtime {
		if got[s] != n {
			t.Errorf("%s[%s] = %d, the runtime says %d", what, s, got[s], n)
		}
	}
}
