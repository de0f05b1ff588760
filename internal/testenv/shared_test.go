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
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func useSharedRecord(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	old := sharedRecord
	sharedRecord = filepath.Join(dir, "ledger", "shared-paths.json")
	t.Cleanup(func() { sharedRecord = old })
	return dir
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

func mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
}

// Two daemons at once, as the integration tests and another package's
// tests run them: the first creates the shared paths, the second finds
// them there, and the first stops first. A record per daemon left them
// behind (the first found them in use, the second had found them there);
// removing what was empty when the first stopped lost a path the second's
// next container made again. The shared record removes them when the last
// daemon stops, and never a path that was there before.
func TestSharedPathsGoWithTheLastDaemon(t *testing.T) {
	dir := useSharedRecord(t)
	run := filepath.Join(dir, "run")
	before := filepath.Join(dir, "run", "before") // the host had it
	mkdirs(t, run, before)
	shims := filepath.Join(run, "containerd")        // both daemons use it
	cgroup := filepath.Join(dir, "cgroup", "k8s.io") // empty between containers
	cni := filepath.Join(dir, "var", "lib", "cni")
	if err := claimShared("/a", shims, cni, cgroup, before); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(shims, "s", "b.sock")
	mkdirs(t, filepath.Join(shims, "s"), cni, cgroup)
	if err := claimShared("/b", shims, cni, cgroup); err != nil {
		t.Fatal(err)
	}
	r, err := loadShared()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(dir, "cgroup"), shims, filepath.Join(dir, "var")}; !reflect.DeepEqual(r.Paths, want) {
		t.Fatalf("record = %v, want %v (the topmost directory each creates; not what existed)", r.Paths, want)
	}
	if err := os.WriteFile(sock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// The first stops; the cgroup and the CNI cache are empty, and stay:
	// the second still runs.
	if _, err := releaseShared("/a"); err != nil {
		t.Fatal(err)
	}
	if !exists(cgroup) || !exists(cni) {
		t.Fatalf("after the first stopped, with the second running: cgroup exists %t, CNI cache exists %t", exists(cgroup), exists(cni))
	}
	// The second stops (its shim's socket gone): everything goes, with the
	// record; what the host had stays.
	os.Remove(sock)
	if kept, err := releaseShared("/b"); err != nil || len(kept) > 0 {
		t.Fatalf("kept %v, %v; want nothing", kept, err)
	}
	for _, p := range []string{shims, filepath.Join(dir, "var"), filepath.Join(dir, "cgroup"), sharedRecord} {
		if exists(p) {
			t.Errorf("after the last daemon stopped %s is there", p)
		}
	}
	if !exists(before) {
		t.Errorf("%s was there before and is gone", before)
	}
}

// A daemon of a killed test process never takes itself off: the next
// release (CleanLeftovers, "") drops it, and removes the paths once no
// live daemon is left; one that is not empty stays in the record.
func TestSharedPathsOfAKilledRun(t *testing.T) {
	dir := useSharedRecord(t)
	gone, busy := filepath.Join(dir, "gone"), filepath.Join(dir, "busy")
	mkdirs(t, filepath.Dir(sharedRecord), gone, busy)
	if err := os.WriteFile(filepath.Join(busy, "f"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(shared{Paths: []string{busy, gone}, Users: []sharedUser{{Dir: "/killed", Owner: os.Getpid(), OwnerStart: "not this process"}}})
	if err := os.WriteFile(sharedRecord, b, 0o600); err != nil {
		t.Fatal(err)
	}
	kept, err := releaseShared("")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{busy}; !reflect.DeepEqual(kept, want) || exists(gone) {
		t.Errorf("kept %v (want %v), %s exists %t", kept, want, gone, exists(gone))
	}
	r, _ := loadShared()
	if len(r.Users) != 0 || !reflect.DeepEqual(r.Paths, []string{busy}) {
		t.Errorf("record after: %+v, want only %s", r, busy)
	}
}

func TestSharedRecordUnreadableIsAnError(t *testing.T) {
	useSharedRecord(t)
	mkdirs(t, filepath.Dir(sharedRecord))
	if err := os.WriteFile(sharedRecord, []byte("{not a record"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := releaseShared(""); err == nil || !strings.Contains(err.Error(), sharedRecord) {
		t.Errorf("releaseShared on a bad record = %v, want an error naming it", err)
	}
	if err := claimShared("/a", filepath.Join(t.TempDir(), "x")); err == nil {
		t.Error("claimShared on a bad record: no error")
	}
	if b, _ := os.ReadFile(sharedRecord); string(b) != "{not a record" {
		t.Errorf("the bad record was overwritten: %q", b)
	}
}

// Killed shims leave their sockets and runc's state outside the daemon's
// directory; the bundles in its state name them (1.6's address file, 2.x's
// bootstrap.json). Another daemon's are not touched.
func TestShimLeftoversRemoved(t *testing.T) {
	dir := t.TempDir()
	oldS, oldR := shimSockets, shimRoot
	shimSockets, shimRoot = filepath.Join(dir, "s"), filepath.Join(dir, "runc")
	t.Cleanup(func() { shimSockets, shimRoot = oldS, oldR })
	state := filepath.Join(dir, "state")
	task := filepath.Join(state, "io.containerd.runtime.v2.task", "k8s.io")
	mkdirs(t, filepath.Join(task, "c16"), filepath.Join(task, "c2x"), shimSockets,
		filepath.Join(shimRoot, "k8s.io", "c16"), filepath.Join(shimRoot, "k8s.io", "c2x"), filepath.Join(shimRoot, "k8s.io", "other"))
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	a, b, other := filepath.Join(shimSockets, "aa11"), filepath.Join(shimSockets, "bb22"), filepath.Join(shimSockets, "cc33")
	write(a, "")
	write(b, "")
	write(other, "")
	write(filepath.Join(task, "c16", "address"), "unix://"+a)
	write(filepath.Join(task, "c2x", "bootstrap.json"), `{"version":3,"address":"unix://`+b+`","protocol":"ttrpc"}`)
	removeShimLeftovers(state)
	for _, p := range []string{a, b, filepath.Join(shimRoot, "k8s.io", "c16"), filepath.Join(shimRoot, "k8s.io", "c2x")} {
		if exists(p) {
			t.Errorf("%s is left", p)
		}
	}
	for _, p := range []string{other, filepath.Join(shimRoot, "k8s.io", "other")} {
		if !exists(p) {
			t.Errorf("%s (another daemon's) was removed", p)
		}
	}
}
