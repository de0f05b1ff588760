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
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The build lock: a second taker waits for the first to let go; one whose
// context ends first gets an error that says what it waited for; a lock
// held by a killed process is free again.
func TestBuildLock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".build")
	ctx := context.Background()
	waited, unlock, err := lockBuild(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if waited > time.Second {
		t.Errorf("a free lock took %s", waited)
	}

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, _, err := lockBuild(short, dir); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "image.lock is locked") {
		t.Errorf("a held lock with a short context: %v, want DeadlineExceeded naming the lock", err)
	}

	got := make(chan time.Duration, 1)
	go func() {
		w, u, err := lockBuild(ctx, dir)
		if err != nil {
			t.Error(err)
			got <- 0
			return
		}
		u()
		got <- w
	}()
	time.Sleep(700 * time.Millisecond)
	unlock()
	select {
	case w := <-got:
		if w < 500*time.Millisecond {
			t.Errorf("the second taker waited %s, want it to wait for the first's unlock", w)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the second taker never got the lock after the first let go")
	}

	// flock(1) holds it in a process group that is then killed (its sleep
	// holds the descriptor too).
	flock, err := exec.LookPath("flock")
	if err != nil {
		t.Skip("no flock(1)")
	}
	holder := exec.Command(flock, filepath.Join(dir, "image.lock"), "sleep", "60")
	holder.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		_, u, err := lockBuild(c, dir)
		cancel()
		if err != nil {
			break // held by flock(1)
		}
		u()
		if time.Now().After(deadline) {
			t.Fatal("flock(1) never took the lock")
		}
		time.Sleep(50 * time.Millisecond)
	}
	syscall.Kill(-holder.Process.Pid, syscall.SIGKILL)
	holder.Wait()
	c, cancel2 := context.WithTimeout(ctx, 10*time.Second)
	defer cancel2()
	_, u, err := lockBuild(c, dir)
	if err != nil {
		t.Fatalf("the lock of a killed holder: %v", err)
	}
	u()
}
