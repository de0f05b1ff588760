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
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// HostState is what the harness changes on the host while daemons run and
// must put back: make test records it before the first daemon starts and
// compares after the last one stops (internal/cmd/hostcheck).
type HostState struct {
	// Sysctls the kubelet's container manager, the bridge CNI plugin and
	// dockerd set, by name; those the kernel does not have are left out.
	Sysctls map[string]string `json:"sysctls"`
	// Mounts are the host's mount points (each as often as it is mounted),
	// but for those under /proc that the kernel mounts on first use.
	Mounts []string `json:"mounts"`
	// Cgroups are the cgroup directories two levels deep in every
	// hierarchy (a controller, then its children): the test cgroup roots,
	// and the containerd and dockerd cgroups of containers run without one.
	Cgroups []string `json:"cgroups"`
	// Links are the network interfaces (a pod network's bridge and veths).
	Links []string `json:"links"`
	// Paths are the fixed host paths the kubelet and the runtimes use
	// whatever they are told, and whether each exists.
	Paths map[string]bool `json:"paths"`
	// Records are the ledgers of daemons still running or not undone.
	Records []string `json:"records"`
}

// HostSysctls are the sysctls HostState records.
func HostSysctls() []string {
	return append(append([]string(nil), kubeletSysctls...),
		"net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding",
		"net.bridge.bridge-nf-call-iptables", "net.bridge.bridge-nf-call-ip6tables")
}

// HostPaths are the fixed paths HostState records.
var HostPaths = []string{
	"/var/lib/kubelet", "/var/lib/kubelet/device-plugins", "/var/log/containers", "/var/log/pods",
	"/var/lib/cni", "/var/run/netns", "/run/containerd", "/run/docker", "/run/nri", "/etc/cni/net.d", "/opt/cni/bin",
}

// ReadHostState reads the host as it is now.
func ReadHostState() (HostState, error) {
	s := HostState{Sysctls: map[string]string{}, Paths: map[string]bool{}}
	for _, n := range HostSysctls() {
		if v, err := readSysctl(n); err == nil {
			s.Sysctls[n] = v
		}
	}
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		// Field 5 is the mount point; binfmt_misc and the like under /proc
		// are automounted whenever something looks.
		if f := strings.Fields(line); len(f) > 4 && !strings.HasPrefix(f[4], "/proc/") {
			s.Mounts = append(s.Mounts, f[4])
		}
	}
	sort.Strings(s.Mounts)
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*")
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		hierarchies = []string{"/sys/fs/cgroup"} // unified only
	}
	for _, h := range hierarchies {
		for _, pattern := range []string{"*", "*/*"} {
			dirs, _ := filepath.Glob(filepath.Join(h, pattern))
			for _, d := range dirs {
				if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
					s.Cgroups = append(s.Cgroups, d)
				}
			}
		}
	}
	sort.Strings(s.Cgroups)
	links, err := os.ReadDir("/sys/class/net")
	if err != nil {
		return s, err
	}
	for _, l := range links {
		s.Links = append(s.Links, l.Name())
	}
	for _, p := range HostPaths {
		s.Paths[p] = len(notExisting(p)) == 0
	}
	s.Records, _ = filepath.Glob(filepath.Join(LedgerDir, "*.json"))
	return s, nil
}

// Diff names each way after differs from before, one line each; none when
// the host is as it was.
func (before HostState) Diff(after HostState) []string {
	var out []string
	for _, n := range sortedKeys(before.Sysctls, after.Sysctls) {
		b, inB := before.Sysctls[n]
		a, inA := after.Sysctls[n]
		switch {
		case inB && inA && a != b:
			out = append(out, fmt.Sprintf("sysctl %s = %s, was %s", n, a, b))
		case inB && !inA:
			out = append(out, fmt.Sprintf("sysctl %s (was %s) is gone", n, b))
		case !inB && inA:
			out = append(out, fmt.Sprintf("sysctl %s = %s appeared (a kernel module loaded by the tests)", n, a))
		}
	}
	out = append(out, listDiff("mount", before.Mounts, after.Mounts)...)
	out = append(out, listDiff("cgroup", before.Cgroups, after.Cgroups)...)
	out = append(out, listDiff("network interface", before.Links, after.Links)...)
	for _, p := range sortedKeys(before.Paths, after.Paths) {
		if before.Paths[p] != after.Paths[p] {
			out = append(out, fmt.Sprintf("%s: existed %t before, %t after", p, before.Paths[p], after.Paths[p]))
		}
	}
	out = append(out, listDiff("record of a daemon in "+LedgerDir+":", before.Records, after.Records)...)
	return out
}

// listDiff names what after has that before had not ("left") and the
// reverse ("gone"), counting repeats (a path mounted twice).
func listDiff(what string, before, after []string) []string {
	count := map[string]int{}
	for _, x := range before {
		count[x]--
	}
	for _, x := range after {
		count[x]++
	}
	names := make([]string, 0, len(count))
	for x := range count {
		names = append(names, x)
	}
	sort.Strings(names)
	var out []string
	for _, x := range names {
		switch n := count[x]; {
		case n > 0:
			out = append(out, fmt.Sprintf("%s %s left (%d more than before)", what, x, n))
		case n < 0:
			out = append(out, fmt.Sprintf("%s %s gone (%d fewer than before)", what, x, -n))
		}
	}
	return out
}

func sortedKeys[V any](maps ...map[string]V) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range maps {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}
