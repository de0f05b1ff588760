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
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// LedgerDir holds one record per running private daemon: what it is, which
// test process owns it and what it changed on the host. A test process that
// is killed leaves its records behind, and the next run undoes them
// (CleanLeftovers) before it starts anything of its own.
const LedgerDir = "/run/pleg-exporter-tests"

// ledger is what one private daemon changed on the host.
type ledger struct {
	Kind string `json:"kind"` // kubelet or containerd
	// Owner is the test process; OwnerStart its start time in clock ticks
	// (a recycled pid does not count as alive).
	Owner      int    `json:"owner"`
	OwnerStart string `json:"owner_start"`
	// Pid is the daemon; Marker an argument only it has (its config file),
	// checked before it is signalled.
	Pid    int    `json:"pid"`
	Marker string `json:"marker"`
	Dir    string `json:"dir"`              // removed, after every mount below it
	Socket string `json:"socket,omitempty"` // containerd: its pods and shims go first
	// Sysctls holds the values before the daemon ran; SetTo the values the
	// daemon sets, known before it starts (they are constants of its
	// source), not read off the host after it: a daemon may apply them at
	// any time, before or after it is ready. At teardown a sysctl that holds
	// the daemon's value is put back, whenever the daemon set it; one that
	// holds neither was set by someone else since, and stays.
	Sysctls map[string]string `json:"sysctls,omitempty"`
	SetTo   map[string]string `json:"set_to,omitempty"`
	// SysctlRoot is where Sysctls were read, when not /proc/sys (a test's
	// fake tree): they go back there, never into the host's.
	SysctlRoot string   `json:"sysctl_root,omitempty"`
	Cgroup     string   `json:"cgroup,omitempty"` // a cgroup tree, removed in every hierarchy
	Links      []string `json:"links,omitempty"`  // network interfaces deleted
	// Created are host directories that did not exist before the daemon
	// (fixed paths the kubelet and containerd use whatever they are told):
	// emptied of the files in Files and of empty directories, then removed
	// if empty. A directory another daemon still uses is not empty and stays.
	Created []string `json:"created,omitempty"`
	Files   []string `json:"files,omitempty"`
	path    string
}

func newLedger(kind, dir string) (*ledger, error) {
	start, err := procStart(os.Getpid())
	if err != nil {
		return nil, err
	}
	root := sysctlRoot
	if root == procSys {
		root = ""
	}
	return &ledger{Kind: kind, Owner: os.Getpid(), OwnerStart: start, Dir: dir, SysctlRoot: root,
		path: filepath.Join(LedgerDir, kind+"-"+strings.NewReplacer("/", "_").Replace(strings.Trim(dir, "/"))+".json")}, nil
}

func (l *ledger) save() error {
	if err := os.MkdirAll(LedgerDir, 0o700); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(l, "", "  ")
	tmp := l.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, l.path)
}

func (l *ledger) remove() { os.Remove(l.path) }

// procStart is field 22 of /proc/PID/stat: the process's start time.
func procStart(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	// The command name (field 2) may hold spaces; fields after it are plain.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 {
		return "", fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	return f[19], nil
}

func alive(pid int, start string) bool {
	s, err := procStart(pid)
	return err == nil && s == start
}

// running reports whether pid is still the daemon the ledger names. A
// record saved before the daemon's pid was known (a run killed in between)
// finds it by its marker.
func (l *ledger) running() bool {
	if l.Pid <= 0 {
		l.Pid = findByArg(l.Marker)
	}
	return l.Pid > 0 && hasArg(l.Pid, l.Marker)
}

func hasArg(pid int, arg string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.Contains("\x00"+string(b), "\x00"+arg+"\x00")
}

// findByArg is the pid of a process with arg among its arguments, or 0.
func findByArg(arg string) int {
	if arg == "" {
		return 0
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err == nil && pid != os.Getpid() && hasArg(pid, arg) {
			return pid
		}
	}
	return 0
}

// CleanLeftovers undoes what daemons of a test process that no longer runs
// left on the host: kubelets first (so nothing restarts pods), then each
// containerd with its pods, then mounts, directories, cgroups, interfaces
// and sysctls. It returns what it did, one line per record.
func CleanLeftovers() ([]string, error) {
	entries, err := os.ReadDir(LedgerDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var left []*ledger
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") || filepath.Join(LedgerDir, e.Name()) == sharedRecord {
			continue
		}
		l, err := loadLedger(filepath.Join(LedgerDir, e.Name()))
		if err != nil {
			return nil, err
		}
		if alive(l.Owner, l.OwnerStart) {
			continue // a test run in progress owns it
		}
		left = append(left, l)
	}
	// The kubelets stop first, so none restarts a pod the runtimes' cleanup
	// removes; their cgroup trees empty only once those pods are gone.
	for _, l := range left {
		if l.Kind == "kubelet" && l.running() {
			signalAndWait(l.Pid, 15*time.Second)
		}
	}
	sort.SliceStable(left, func(i, j int) bool { return left[i].Kind != "kubelet" && left[j].Kind == "kubelet" })
	var done []string
	var errs []error
	for _, l := range left {
		if err := l.undo(); err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", l.Kind, l.Dir, err))
			continue
		}
		done = append(done, fmt.Sprintf("removed a leftover %s (pid %d, %s) of test process %d", l.Kind, l.Pid, l.Dir, l.Owner))
	}
	// The shared paths, once no daemon that uses them is left (those of
	// test processes still running stay; make test's host check names what
	// is left at the end).
	if _, err := releaseShared(""); err != nil {
		errs = append(errs, err)
	}
	return done, errors.Join(errs...)
}

// loadLedger reads a record as a killed run left it.
func loadLedger(path string) (*ledger, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	l := &ledger{path: path}
	if err := json.Unmarshal(b, l); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

// CleanLeftoversOrExit is CleanLeftovers for a TestMain: as root, it prints
// what it removed, and exits 1 when it cannot clean up.
func CleanLeftoversOrExit() {
	if os.Geteuid() != 0 {
		return
	}
	done, err := CleanLeftovers()
	for _, d := range done {
		fmt.Println(d)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cleaning up after a killed run:", err)
		os.Exit(1)
	}
}

// undo reverts everything the record names and deletes the record.
func (l *ledger) undo() error {
	if l.running() {
		if l.Kind == "containerd" && l.Socket != "" {
			syscall.Kill(l.Pid, syscall.SIGCONT)
			if cc, err := dialSocket(l.Socket, 256<<20); err == nil {
				removeAllPods(runtimeapi.NewRuntimeServiceClient(cc))
				cc.Close()
			}
		}
		signalAndWait(l.Pid, 15*time.Second)
	}
	if l.Socket != "" {
		killShims(l.Socket)
		removeShimLeftovers(filepath.Join(l.Dir, "state"))
	}
	var errs []error
	for _, f := range l.Files {
		os.Remove(f)
	}
	if l.Dir != "" {
		removeLinksInto("/var/log/containers", l.Dir)
	}
	for _, d := range l.Created {
		pruneEmpty(d)
	}
	if l.Dir != "" {
		unmountUnder(l.Dir)
		if err := os.RemoveAll(l.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	if l.Cgroup != "" {
		if err := removeCgroup(l.Cgroup); err != nil {
			errs = append(errs, err)
		}
	}
	for _, link := range l.Links {
		deleteLink(link)
	}
	if err := l.restoreSysctls(); err != nil {
		errs = append(errs, err)
	}
	if _, err := releaseShared(l.Dir); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		// The record keeps what is left to do (the sysctls not yet put
		// back), for the next run.
		l.save()
		return err
	}
	l.remove()
	return nil
}

// signalAndWait sends SIGTERM (SIGKILL after timeout) to a process that is
// not our child, and waits until it is gone.
func signalAndWait(pid int, timeout time.Duration) {
	syscall.Kill(pid, syscall.SIGCONT)
	syscall.Kill(pid, syscall.SIGTERM)
	deadline, killed := time.Now().Add(timeout), false
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			if killed {
				return // stuck in the kernel; nothing more to do from here
			}
			syscall.Kill(pid, syscall.SIGKILL)
			deadline, killed = time.Now().Add(30*time.Second), true
		}
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && strings.Contains(string(st), ") Z ") {
			return // a zombie of a dead parent: gone for our purposes
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// notExisting returns, for each path that does not exist (yet), the
// topmost of its directories that does not exist either: what creating it
// would create.
func notExisting(paths ...string) []string {
	var out []string
	for _, p := range paths {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			continue
		}
		top := p
		for d := filepath.Dir(p); d != "/" && d != "."; d = filepath.Dir(d) {
			if _, err := os.Lstat(d); !errors.Is(err, os.ErrNotExist) {
				break
			}
			top = d
		}
		out = append(out, top)
	}
	return out
}

// pruneEmpty removes the empty directories of a tree, deepest first.
func pruneEmpty(root string) {
	var dirs []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		syscall.Rmdir(dirs[i]) // fails on a directory that is not empty
	}
}

// removeLinksInto removes the symlinks in dir that point below target (the
// kubelet's /var/log/containers links to its pods' logs).
func removeLinksInto(dir, target string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if dest, err := os.Readlink(p); err == nil && strings.HasPrefix(dest, target+"/") {
			os.Remove(p)
		}
	}
}

// restoreSysctls puts back each sysctl that holds the value the daemon
// sets (SetTo), or that the record says nothing of, and leaves the others:
// one that still holds its value from before needs nothing, one that holds
// neither was set by someone else. Each sysctl left for a reason other than
// the first gets one log line; one that cannot be read or written is an
// error naming it, and the others are still put back; only those stay in
// the record.
func (l *ledger) restoreSysctls() error {
	names := make([]string, 0, len(l.Sysctls))
	for k := range l.Sysctls {
		names = append(names, k)
	}
	sort.Strings(names)
	root := l.SysctlRoot
	if root == "" {
		root = procSys
	}
	var errs []error
	var notSet []string
	for _, k := range names {
		was := l.Sysctls[k]
		now, err := readSysctlFile(sysctlFile(root, k))
		if err != nil {
			errs = append(errs, fmt.Errorf("sysctl %s: cannot read it to put back %s: %w", k, was, err))
			continue
		}
		set, known := l.SetTo[k]
		switch {
		case now == was:
			if known && set != was {
				notSet = append(notSet, fmt.Sprintf("%s (still %s, not %s)", k, now, set))
			}
			delete(l.Sysctls, k)
			continue
		case known && now != set:
			Logf("%s %s: sysctl %s = %s, neither its value before (%s) nor the %s's (%s): someone else set it since; left as it is",
				l.Kind, l.Dir, k, now, was, l.Kind, set)
			delete(l.Sysctls, k)
			continue
		}
		if err := writeSysctl(sysctlFile(root, k), was); err != nil {
			errs = append(errs, fmt.Errorf("sysctl %s: cannot put back %s (it is %s): %w", k, was, now, err))
			continue
		}
		delete(l.Sysctls, k)
	}
	if len(notSet) > 0 {
		Logf("%s %s: the %s never set %s: nothing to put back there", l.Kind, l.Dir, l.Kind, strings.Join(notSet, ", "))
	}
	return errors.Join(errs...)
}

// Logf prints one line of what the harness did or could not do on the host
// (to stderr, which go test shows); a test may replace it to read the lines.
var Logf = func(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "testenv: "+format+"\n", args...)
}

const procSys = "/proc/sys"

// sysctlRoot is where sysctls are read: /proc/sys, or a test's fake tree.
var sysctlRoot = procSys

func sysctlFile(root, name string) string {
	return filepath.Join(root, strings.ReplaceAll(name, ".", "/"))
}

func readSysctl(name string) (string, error) { return readSysctlFile(sysctlFile(sysctlRoot, name)) }

func readSysctlFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return strings.TrimSpace(string(b)), err
}

// writeSysctl writes a sysctl's file; a variable so that a test can make
// one unwritable, as a read-only /proc/sys in a container is.
var writeSysctl = func(path, value string) error {
	return os.WriteFile(path, []byte(value), 0o644)
}

// saveSysctls reads the current values of names; missing ones are skipped.
func saveSysctls(names ...string) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		if v, err := readSysctl(n); err == nil {
			out[n] = v
		}
	}
	return out
}

// cgroupDirs is where the cgroup name lives: in every v1 hierarchy, or at
// the root of the unified (v2) hierarchy.
func cgroupDirs(name string) []string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return []string{filepath.Join("/sys/fs/cgroup", name)}
	}
	hier, _ := filepath.Glob("/sys/fs/cgroup/*")
	var out []string
	seen := map[string]bool{}
	for _, h := range hier {
		// cpu and cpuacct are often one hierarchy with two links to it.
		real, err := filepath.EvalSymlinks(h)
		if err != nil || seen[real] {
			continue
		}
		seen[real] = true
		var st syscall.Statfs_t
		if syscall.Statfs(real, &st) != nil || (st.Type != 0x27e0eb && st.Type != 0x63677270) {
			continue // not a cgroup (v1: CGROUP_SUPER_MAGIC, v2: CGROUP2_SUPER_MAGIC) mount
		}
		out = append(out, filepath.Join(real, name))
	}
	return out
}

func makeCgroup(name string) error {
	for _, d := range cgroupDirs(name) {
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	}
	return nil
}

// removeCgroup removes a cgroup tree, deepest first; processes still in it
// (none once the pods are gone) keep it, and that is an error.
func removeCgroup(name string) error {
	var errs []error
	for _, root := range cgroupDirs(name) {
		var dirs []string
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		// Processes left in the tree (a pod whose shim was killed because
		// its runtime could not remove it) are ours by construction.
		for _, d := range dirs {
			if b, err := os.ReadFile(filepath.Join(d, "cgroup.procs")); err == nil {
				for _, f := range strings.Fields(string(b)) {
					var pid int
					if _, err := fmt.Sscan(f, &pid); err == nil && pid > 0 {
						syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			}
		}
		// A cgroup empties a moment after its last process exits.
		deadline := time.Now().Add(10 * time.Second)
		for i := len(dirs) - 1; i >= 0; i-- {
			var err error
			for {
				if err = syscall.Rmdir(dirs[i]); err == nil || errors.Is(err, syscall.ENOENT) {
					err = nil
					break
				}
				if time.Now().After(deadline) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("rmdir %s: %w", dirs[i], err))
			}
		}
	}
	return errors.Join(errs...)
}

func linkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}

func deleteLink(name string) {
	if linkExists(name) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		exec.CommandContext(ctx, "ip", "link", "delete", name).Run()
	}
}
