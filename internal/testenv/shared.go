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
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"syscall"
)

// Some host paths are created by every private daemon whatever it is told,
// and shared by all that run at once: containerd's shims keep their sockets
// in /run/containerd/s, dockerd its plugin sockets in /run/docker, go-cni its
// cache in /var/lib/cni, and containers run without a cgroup parent land in
// the /k8s.io (containerd's CRI) and /docker (dockerd) cgroups. A record per
// daemon cannot put them back: the daemon that created one may stop while
// another still uses it, and the other found it there and did not record
// it; and a path removed while another daemon still runs comes back with
// that daemon's next container. So they have one record for all test
// processes (sharedRecord): the paths, and the daemons using them. A daemon
// adds itself, and the paths it finds missing, before it starts, and takes
// itself off when it stops; the last one (or CleanLeftovers, once every
// daemon named is gone with its process) removes the paths, directories
// deepest first, cgroups without processes. What is not empty then stays in
// the record, and the host check names it.

// sharedRecord is the record of the shared paths the test daemons created;
// a variable so that a test can use its own.
var sharedRecord = filepath.Join(LedgerDir, "shared-paths.json")

// lockShared takes the lock on the shared record (a flock on its
// directory, held by one test process at a time) and returns its release.
func lockShared() (func(), error) {
	dir := filepath.Dir(sharedRecord)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// shared is the record: the paths the test daemons created, and the
// daemons still using them.
type shared struct {
	Paths []string     `json:"paths"`
	Users []sharedUser `json:"users,omitempty"`
}

// sharedUser is one daemon: its directory, and its test process (with its
// start time: a recycled pid does not count as alive).
type sharedUser struct {
	Dir        string `json:"dir"`
	Owner      int    `json:"owner"`
	OwnerStart string `json:"owner_start"`
}

func loadShared() (shared, error) {
	var r shared
	b, err := os.ReadFile(sharedRecord)
	if errors.Is(err, os.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("%s: %w", sharedRecord, err)
	}
	return r, nil
}

func saveShared(r shared) error {
	if len(r.Paths) == 0 && len(r.Users) == 0 {
		if err := os.Remove(sharedRecord); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	sort.Strings(r.Paths)
	b, _ := json.MarshalIndent(r, "", "  ")
	tmp := sharedRecord + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, sharedRecord)
}

// claimShared adds the daemon in dir to the record, with those of paths
// (directories or cgroup directories) that do not exist yet, by the topmost
// directory creating each would make: before the daemon starts.
func claimShared(dir string, paths ...string) error {
	unlock, err := lockShared()
	if err != nil {
		return err
	}
	defer unlock()
	r, err := loadShared()
	if err != nil {
		return err
	}
	start, err := procStart(os.Getpid())
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, p := range r.Paths {
		seen[p] = true
	}
	for _, p := range notExisting(paths...) {
		if !seen[p] {
			r.Paths, seen[p] = append(r.Paths, p), true
		}
	}
	r.Users = append(r.Users, sharedUser{Dir: dir, Owner: os.Getpid(), OwnerStart: start})
	return saveShared(r)
}

// releaseShared takes the daemon in dir off the record (none: only those
// whose test process is gone) and, when no daemon is left, removes the
// recorded paths that are empty; it returns the paths it kept (in use, or
// not empty).
func releaseShared(dir string) ([]string, error) {
	unlock, err := lockShared()
	if err != nil {
		return nil, err
	}
	defer unlock()
	r, err := loadShared()
	if err != nil {
		return nil, err
	}
	users := r.Users[:0]
	for _, u := range r.Users {
		if (dir == "" || u.Dir != dir) && alive(u.Owner, u.OwnerStart) {
			users = append(users, u)
		}
	}
	r.Users = users
	if len(r.Users) > 0 {
		return r.Paths, saveShared(r)
	}
	var kept []string
	for _, p := range r.Paths {
		pruneEmpty(p)
		if _, err := os.Lstat(p); err == nil {
			kept = append(kept, p)
		}
	}
	r.Paths = kept
	return kept, saveShared(r)
}

// containerdShared and dockerdShared are the shared paths each daemon may
// create.
func containerdShared() []string {
	return append([]string{"/run/containerd", "/var/lib/cni"}, cgroupDirs("k8s.io")...)
}

func dockerdShared() []string {
	return append([]string{"/run/containerd", "/run/docker"}, cgroupDirs("docker")...)
}

// shimSocket is a shim's socket in its bundle's address file (containerd
// 1.6, 1.7) or bootstrap.json (2.x), in /run/containerd/s whatever the
// daemon's config says.
var shimSocket = regexp.MustCompile(`unix://(/[^"\s]+)`)

// shimSockets is where shims put their sockets, and shimRoot where
// containerd-shim-runc-v2 keeps runc's state by default; variables so that
// a test can use its own.
var shimSockets, shimRoot = "/run/containerd/s", "/run/containerd/runc"

// removeShimLeftovers removes what the shims of the containerd whose state
// directory is state leave outside it when they are killed (a teardown that
// kills rather than removes thousands of containers, a shim of a crashed
// daemon): their sockets, and runc's state of their containers. Each bundle
// in state names its own; other daemons' are not touched.
func removeShimLeftovers(state string) {
	bundles, _ := filepath.Glob(filepath.Join(state, "io.containerd.runtime.v2.task", "*", "*"))
	for _, b := range bundles {
		for _, f := range []string{"address", "bootstrap.json"} {
			if raw, err := os.ReadFile(filepath.Join(b, f)); err == nil {
				if m := shimSocket.FindSubmatch(raw); m != nil && filepath.Dir(string(m[1])) == shimSockets {
					os.Remove(string(m[1]))
				}
			}
		}
		ns, id := filepath.Base(filepath.Dir(b)), filepath.Base(b)
		os.RemoveAll(filepath.Join(shimRoot, ns, id))
	}
}
