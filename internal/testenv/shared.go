package testenv

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
// it. So they have one record for all test processes (sharedRecord): a
// daemon that finds one missing adds it before it starts, and every daemon
// that stops (and CleanLeftovers) removes those that are empty by then
// (directories deepest first; cgroups without processes). The last one to
// stop finds them all empty and removes the record.

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

func loadShared() ([]string, error) {
	b, err := os.ReadFile(sharedRecord)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var paths []string
	if err := json.Unmarshal(b, &paths); err != nil {
		return nil, fmt.Errorf("%s: %w", sharedRecord, err)
	}
	return paths, nil
}

func saveShared(paths []string) error {
	if len(paths) == 0 {
		if err := os.Remove(sharedRecord); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	sort.Strings(paths)
	b, _ := json.MarshalIndent(paths, "", "  ")
	tmp := sharedRecord + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, sharedRecord)
}

// claimShared records those of paths (directories or cgroup directories)
// that do not exist yet, by the topmost directory creating each would
// make, before a daemon that may create them starts.
func claimShared(paths ...string) error {
	unlock, err := lockShared()
	if err != nil {
		return err
	}
	defer unlock()
	have, err := loadShared()
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, p := range have {
		seen[p] = true
	}
	for _, p := range notExisting(paths...) {
		if !seen[p] {
			have, seen[p] = append(have, p), true
		}
	}
	return saveShared(have)
}

// releaseShared removes the recorded shared paths that are empty now and
// keeps the others in the record (another daemon still uses them); it
// returns those kept.
func releaseShared() ([]string, error) {
	unlock, err := lockShared()
	if err != nil {
		return nil, err
	}
	defer unlock()
	have, err := loadShared()
	if err != nil {
		return nil, err
	}
	var kept []string
	for _, p := range have {
		pruneEmpty(p)
		if _, err := os.Lstat(p); err == nil {
			kept = append(kept, p)
		}
	}
	return kept, saveShared(kept)
}

// containerdShared and dockerdShared are the shared paths each daemon may
// create.
func containerdShared() []string {
	return append([]string{"/run/containerd", "/var/lib/cni"}, cgroupDirs("k8s.io")...)
}

func dockerdShared() []string {
	return append([]string{"/run/containerd", "/run/docker"}, cgroupDirs("docker")...)
}
