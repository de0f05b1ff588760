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

package diagnose

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// Fuzz modes, one bit each.
const (
	fuzzDocker     = 1 << iota // listed through Docker
	fuzzDockerOnly             // Docker: every container is Docker's own
	fuzzNoPayload              // the runtime gave no payload sizes
	fuzzNoTimes                // no creation times
	fuzzFailing                // list error, incomplete listing, timed-out probes
)

// fuzzInventory builds a node from hostile values: n containers and about
// n/4 sandboxes whose namespaces, pods, names and IDs are the fuzzed strings
// (and ordinary ones beside them), each size the fuzzed one.
func fuzzInventory(ns, pod, name, id string, size int64, n int, mode uint8) *kubecontainer.Inventory {
	inv := &kubecontainer.Inventory{Info: kubecontainer.Info{Runtime: name, Version: ns, Endpoint: pod}, View: kubecontainer.ViewCRI}
	if mode&fuzzDocker != 0 {
		inv.View = kubecontainer.ViewDocker
	}
	if mode&fuzzNoPayload == 0 {
		inv.Payload = map[string]int64{kubecontainer.RPCListContainers: size * int64(n), kubecontainer.RPCListPodSandbox: size}
	}
	if mode&fuzzFailing != 0 {
		inv.ListErr, inv.Incomplete = errors.New(name), id
	}
	namespaces := []string{ns, "default", pod, ns, ""}
	pods := []string{pod, name, "p-1", pod}
	ids := []string{id, fmt.Sprintf("%x", n), id + "0", fmt.Sprintf("%064x", n)}
	states := []string{kubecontainer.ContainerExited, kubecontainer.ContainerUnknown, kubecontainer.ContainerRunning, kubecontainer.ContainerExited, kubecontainer.ContainerCreated}
	dockerStates := []string{kubecontainer.DockerDead, kubecontainer.DockerExited, kubecontainer.DockerRunning, kubecontainer.DockerRemoving}
	created := func(i int) time.Time {
		if mode&fuzzNoTimes != 0 || i%7 == 6 {
			return time.Time{}
		}
		return now.Add(-time.Duration(i) * time.Minute)
	}
	for i := 0; i < n; i++ {
		c := kubecontainer.Container{ID: ids[i%len(ids)], Name: name, Pod: pods[i%len(pods)], Namespace: namespaces[i%len(namespaces)],
			State: states[i%len(states)], CreatedAt: created(i), Bytes: size}
		if inv.View == kubecontainer.ViewDocker {
			c.DockerState = dockerStates[i%len(dockerStates)]
			if mode&fuzzDockerOnly != 0 || i%5 == 4 {
				c.State, c.Bytes, c.Pod, c.Namespace = kubecontainer.ContainerDockerOnly, 0, "", ""
			}
		}
		inv.Containers = append(inv.Containers, c)
	}
	for i := 0; i <= n/4; i++ {
		state := kubecontainer.SandboxNotReady
		if i%3 == 2 {
			state = kubecontainer.SandboxReady
		}
		inv.Sandboxes = append(inv.Sandboxes, kubecontainer.Sandbox{ID: ids[i%len(ids)], Pod: pods[i%len(pods)], Namespace: namespaces[i%len(namespaces)],
			State: state, CreatedAt: created(i), Bytes: size})
	}
	for i := 0; i < min(n, 3); i++ {
		inv.Probes = append(inv.Probes, kubecontainer.ProbeResult{Kind: name, ID: ids[i], Duration: time.Duration(size),
			Err: errors.New(ns), TimedOut: mode&fuzzFailing != 0})
	}
	return inv
}

// FuzzReport renders reports of hostile inventories: Build and both
// renderers never panic, every cleanup command is one line sh reads as the
// report's own words and quoted valid names, the text is plain text and the
// JSON valid. `go test` runs the seeds; fuzz with
// go test -run='^$' -fuzz=FuzzReport -fuzztime=60s ./diagnose/
func FuzzReport(f *testing.F) {
	for i, h := range hostile {
		f.Add(h, "team-a", h, h, int64(2500), uint16(400), uint8(i%4), uint32(1<<20))
		f.Add("batch-jobs", h, "w", "c0ffee", int64(60000), uint16(300), uint8(0), uint32(16<<20))
		f.Add(h, h, h, h, int64(0), uint16(50), uint8(fuzzDocker|fuzzDockerOnly), uint32(16<<20))
	}
	f.Add("", "", "", "", int64(0), uint16(0), uint8(0), uint32(0))
	f.Add("ns", "pod", "name", "ab", int64(math.MaxInt64), uint16(599), uint8(fuzzDocker|fuzzFailing), uint32(math.MaxUint32))
	f.Add("ns", "pod", "name", "ab", int64(math.MinInt64), uint16(7), uint8(fuzzNoTimes), uint32(1))
	f.Add("ns", "pod", "name", "ab", int64(1), uint16(5000), uint8(fuzzDocker), uint32(16<<20))
	f.Fuzz(func(t *testing.T, ns, pod, name, id string, size int64, n uint16, mode uint8, limit uint32) {
		th := DefaultThresholds
		th.LimitBytes = int64(limit) + 1 // the flag is positive
		th.Top = 1 + int(mode>>5)        // and at least 1
		r := Build(fuzzInventory(ns, pod, name, id, size, int(n%600), mode), th, now)
		for _, s := range r.Cleanup {
			checkCommand(t, s.Command)
			if s.Why == "" {
				t.Fatalf("step %q says nothing", s.Command)
			}
		}
		var buf bytes.Buffer
		r.Text(&buf)
		checkPlainText(t, buf.String())
		buf.Reset()
		if err := r.JSON(&buf); err != nil {
			t.Fatalf("json: %v", err)
		}
		var back Report
		if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
			t.Fatalf("json does not read back: %v\n%s", err, buf.String())
		}
	})
}
