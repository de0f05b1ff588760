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
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestRoutedReadsProcNetRoute(t *testing.T) {
	table := `Iface	Destination	Gateway 	Flags	RefCnt	Use	Metric	Mask		MTU	Window	IRTT
eth0	00000000	0100000A	0003	0	0	0	00000000	0	0	0
eth0	0000000A	00000000	0001	0	0	0	000000FF	0	0	0
br0	0005FE0A	00000000	0001	0	0	0	00FFFFFF	0	0	0
`
	for _, c := range []struct {
		net  [4]byte
		want bool
	}{
		{[4]byte{10, 254, 5, 0}, true},   // the /24 route
		{[4]byte{10, 254, 6, 0}, true},   // inside 10.0.0.0/8
		{[4]byte{192, 168, 7, 0}, false}, // only the default route covers it
		{[4]byte{172, 17, 0, 0}, false},
	} {
		if got := routed(table, c.net); got != c.want {
			t.Errorf("routed(%v) = %t, want %t", c.net, got, c.want)
		}
	}
}

func TestNotExistingNamesWhatWouldBeCreated(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "a"), 0o755)
	got := notExisting(filepath.Join(dir, "a"), filepath.Join(dir, "a", "b", "c"), filepath.Join(dir, "d"))
	want := []string{filepath.Join(dir, "a", "b"), filepath.Join(dir, "d")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("notExisting = %v, want %v", got, want)
	}
}

func TestHostStateDiffNamesEachChange(t *testing.T) {
	before := HostState{
		Sysctls: map[string]string{"kernel.panic": "1", "net.ipv4.ip_forward": "0"},
		Mounts:  []string{"/", "/tmp/x"},
		Cgroups: []string{"/sys/fs/cgroup/memory/user.slice"},
		Links:   []string{"eth0", "lo"},
		Paths:   map[string]bool{"/var/lib/cni": false, "/var/log/containers": true},
	}
	if d := before.Diff(before); len(d) != 0 {
		t.Fatalf("a host compared with itself: %q", d)
	}
	after := HostState{
		Sysctls: map[string]string{"kernel.panic": "10", "net.ipv4.ip_forward": "0", "net.bridge.bridge-nf-call-iptables": "1"},
		Mounts:  []string{"/", "/tmp/x", "/tmp/x"},
		Cgroups: []string{"/sys/fs/cgroup/memory/pleg-exporter-test-0a1b2c3d", "/sys/fs/cgroup/memory/user.slice"},
		Links:   []string{"eth0", "lo", "pleg-br0"},
		Paths:   map[string]bool{"/var/lib/cni": true, "/var/log/containers": true},
		Records: []string{LedgerDir + "/kubelet-tmp_x.json"},
	}
	want := []string{
		"sysctl kernel.panic = 10, was 1",
		"sysctl net.bridge.bridge-nf-call-iptables = 1 appeared (a kernel module loaded by the tests)",
		"mount /tmp/x left (1 more than before)",
		"cgroup /sys/fs/cgroup/memory/pleg-exporter-test-0a1b2c3d left (1 more than before)",
		"network interface pleg-br0 left (1 more than before)",
		"/var/lib/cni: existed false before, true after",
		"record of a daemon in " + LedgerDir + ": " + LedgerDir + "/kubelet-tmp_x.json left (1 more than before)",
	}
	if got := before.Diff(after); !reflect.DeepEqual(got, want) {
		t.Errorf("Diff:\n got %q\nwant %q", got, want)
	}
	if got := after.Diff(before); len(got) != len(want) {
		t.Errorf("the reverse Diff names %d changes, want %d: %q", len(got), len(want), got)
	}
}
