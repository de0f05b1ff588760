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

package detect

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// bindMount mounts src on dst the way a hostPath volume does, or skips.
func bindMount(t *testing.T, src, dst string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root")
	}
	if out, err := exec.Command("mount", "--bind", src, dst).CombinedOutput(); err != nil {
		t.Skipf("mount --bind: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dst).Run() })
}

// restart does what a runtime does when it restarts: its socket is deleted
// and a new one is made at the same path.
func restart(t *testing.T, l net.Listener, path string) net.Listener {
	t.Helper()
	l.Close()
	os.Remove(path)
	l2, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l2.Close() })
	return l2
}

func TestStaleSocketFileMount(t *testing.T) {
	host, pod := t.TempDir(), t.TempDir()
	sock := filepath.Join(host, "containerd.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	mounted := filepath.Join(pod, "containerd.sock")
	os.WriteFile(mounted, nil, 0o600)
	bindMount(t, sock, mounted)
	if err := StaleSocket(mounted); err != nil {
		t.Fatalf("before the restart: %v", err)
	}
	restart(t, l, sock)
	if c, err := net.Dial("unix", mounted); err == nil {
		c.Close()
		t.Fatal("the file mount still connects after the restart; the test does not reproduce the failure")
	}
	err = StaleSocket(filepath.Join(pod, "missing.sock"), mounted)
	var stale *StaleSocketError
	if !errors.As(err, &stale) || stale.Socket != mounted || stale.Deleted != mounted {
		t.Fatalf("after the restart: %v, want the file mount reported stale", err)
	}
	t.Log(err)
}

// The directory mount the DaemonSet uses sees the new socket: not stale, and
// it connects.
func TestDirectoryMountFollowsRestart(t *testing.T) {
	host, pod := t.TempDir(), t.TempDir()
	sock := filepath.Join(host, "containerd.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	bindMount(t, host, pod)
	restart(t, l, sock)
	mounted := filepath.Join(pod, "containerd.sock")
	if err := StaleSocket(mounted); err != nil {
		t.Fatalf("directory mount: %v", err)
	}
	c, err := net.Dial("unix", mounted)
	if err != nil {
		t.Fatalf("directory mount after the restart: %v", err)
	}
	c.Close()
}

// A directory deleted and re-created on the host leaves its mount stale too.
func TestStaleSocketDirectoryDeleted(t *testing.T) {
	parent, pod := t.TempDir(), t.TempDir()
	host := filepath.Join(parent, "containerd")
	os.Mkdir(host, 0o755)
	bindMount(t, host, pod)
	os.RemoveAll(host)
	os.Mkdir(host, 0o755)
	err := StaleSocket(filepath.Join(pod, "containerd.sock"))
	var stale *StaleSocketError
	if !errors.As(err, &stale) || stale.Deleted != pod {
		t.Fatalf("got %v, want the mounted directory reported stale", err)
	}
}

// A runtime that is down (socket missing) is not a stale mount.
func TestMissingSocketIsNotStale(t *testing.T) {
	if err := StaleSocket(filepath.Join(t.TempDir(), "none.sock"), "/run/no/such/dir/containerd.sock"); err != nil {
		t.Fatal(err)
	}
}

func TestSockets(t *testing.T) {
	got := Config{DockerHost: "none"}.Sockets()
	if len(got) != len(DefaultCandidates) || got[0] != "/run/containerd/containerd.sock" {
		t.Errorf("auto: %v", got)
	}
	got = Config{Endpoint: "unix:///host/run/containerd/containerd.sock", DockerHost: "unix:///host/var/run/docker.sock"}.Sockets()
	if len(got) != 2 || got[0] != "/host/run/containerd/containerd.sock" || got[1] != "/host/var/run/docker.sock" {
		t.Errorf("explicit: %v", got)
	}
}
