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

package mixin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pleg-exporter/pleg_exporter/internal/stack"
)

// The recordings of make test-kubelets (testdata/kubelets): one file per
// kubelet version, runtime and gates, each the series a real kubelet of
// that version and the exporter produced through the freeze and the
// overflow, with the alerts that fired live at each check. Replayed here
// through the rendered rules: the alerts must fire, and stay quiet, as they
// did live on that version. Each file is named by what its own series say
// (the kubelet's kubernetes_build_info and kubernetes_feature_enabled, the
// exporter's pleg_runtime_info), so one version's recording cannot stand in
// for another's.
func TestKubeletRecordings(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root, "testdata", "kubelets", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no recordings in testdata/kubelets (make test-kubelets writes them)")
	}
	if _, err := exec.LookPath("promtool"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skipf("skipping: %v (make deps installs it)", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r, err := stack.ReadRecording(f)
			if err != nil {
				t.Fatal(err)
			}
			if want := r.Cell() + ".yaml"; filepath.Base(f) != want {
				t.Errorf("the recording's series are of %s: the file must be named %s", r.Cell(), want)
			}
			if !strings.Contains(r.Name, "kubelet "+r.Kubelet+" ") {
				t.Errorf("the recording says %q, its series are of the kubelet %s", r.Name, r.Kubelet)
			}
			cmd := exec.Command("promtool", "test", "rules", filepath.Base(f))
			cmd.Dir = filepath.Dir(f)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("promtool test rules %s: %v\n%s", f, err, out)
			}
			t.Logf("%s: %d checks replayed", r.Cell(), len(r.Checks))
		})
	}
}
