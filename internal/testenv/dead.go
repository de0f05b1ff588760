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
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/docker/docker/api/types/container"
)

const pinFile = ".pleg-test-pin"

// MakeDead turns a stopped container into a Docker "dead" one the way it
// happens in the field: its removal fails half way (here an immutable file
// in its writable layer; in the field a busy mount), and once the daemon
// reloads its state the container lists as dead. Call Restart afterwards.
func (d *Dockerd) MakeDead(ctx context.Context, id string) error {
	_, err := d.MakeDeadPinned(ctx, id)
	return err
}

// MakeDeadPinned is MakeDead, and returns the immutable file that makes
// every removal fail: Unpin it to let a removal succeed.
func (d *Dockerd) MakeDeadPinned(ctx context.Context, id string) (string, error) {
	info, err := d.API.ContainerInspect(ctx, id)
	if err != nil {
		return "", err
	}
	upper := info.GraphDriver.Data["UpperDir"]
	if upper == "" || !strings.HasPrefix(upper, d.Dir) {
		return "", fmt.Errorf("container %s has no writable layer under %s (driver %s)", id, d.Dir, info.GraphDriver.Name)
	}
	pin := filepath.Join(upper, pinFile)
	if err := os.WriteFile(pin, nil, 0o644); err != nil {
		return "", err
	}
	if out, err := exec.Command("chattr", "+i", pin).CombinedOutput(); err != nil {
		return "", fmt.Errorf("chattr +i: %v: %s", err, out)
	}
	if err := d.API.ContainerRemove(ctx, id, container.RemoveOptions{}); err == nil {
		return "", fmt.Errorf("removal of %s succeeded; expected it to fail", id)
	}
	return pin, nil
}

// Unpin clears a file MakeDeadPinned made immutable.
func Unpin(pin string) error {
	if out, err := exec.Command("chattr", "-i", pin).CombinedOutput(); err != nil {
		return fmt.Errorf("chattr -i: %v: %s", err, out)
	}
	return nil
}

// unpinAll clears the immutable files MakeDead left so the data can go.
func unpinAll(dir string) {
	matches, _ := filepath.Glob(filepath.Join(dir, "root", "overlay2", "*", "diff", pinFile))
	for _, m := range matches {
		exec.Command("chattr", "-i", m).Run()
	}
}
