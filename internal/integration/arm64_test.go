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
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The release's arm64 binary, run under Debian's qemu-user-static: it
// says its version, and relists the private containerd through its socket
// (diagnose's one listing), counting what the runtime itself answers.
func TestArm64BinaryUnderQemu(t *testing.T) {
	need(t, ctdErr)
	qemu, err := exec.LookPath("qemu-aarch64-static")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("qemu-aarch64-static not installed (qemu-user-static; make deps installs it)")
		}
		t.Skip("qemu-user-static not installed")
	}
	bin := filepath.Join(t.TempDir(), "pleg_exporter")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "../../cmd/pleg_exporter")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("GOARCH=arm64 go build: %v\n%s", err, out)
	}
	if out, err := exec.Command("file", bin).Output(); err == nil && !strings.Contains(string(out), "aarch64") {
		t.Fatalf("not an arm64 binary: %s", out)
	}
	out, err := exec.Command(qemu, bin, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "pleg_exporter, version") {
		t.Fatalf("qemu-aarch64-static pleg_exporter --version: %v\n%s", err, out)
	}
	t.Logf("arm64 under qemu: %s", strings.SplitN(string(out), "\n", 2)[0])

	populate(t, containerds[0])
	c := ctx(t, 2*time.Minute)
	tr := readTruth(t, c, containerds[0])
	t0 := time.Now()
	var r struct {
		Containers map[string]int `json:"containers"`
		Sandboxes  map[string]int `json:"sandboxes"`
	}
	diagnoseJSON(t, &r, qemu, bin, "diagnose", "--output=json", "--no-relist.status", "--probe.max-per-cycle=0", "--runtime.endpoint="+ctd.Endpoint())
	sameCounts(t, "arm64: containers", r.Containers, tr.containers)
	sameCounts(t, "arm64: sandboxes", r.Sandboxes, tr.sandboxes)
	t.Logf("arm64 under qemu relisted containerd in %s: containers %v, sandboxes %v, as the runtime answers",
		time.Since(t0).Round(time.Millisecond), r.Containers, r.Sandboxes)
}
