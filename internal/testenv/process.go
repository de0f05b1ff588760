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
	"os/exec"
	"syscall"
	"time"
)

// StopProcess stops a daemon the way systemctl stop does: SIGTERM, then
// SIGKILL after grace, and returns once it has exited (done is closed by
// the goroutine that waits for cmd). A daemon started in a process group
// of its own (Setpgid) is killed with its group, so the children it forked
// (dockerd's containerd) go with it.
func StopProcess(cmd *exec.Cmd, done <-chan struct{}, grace time.Duration) {
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return
	case <-time.After(grace):
	}
	if cmd.SysProcAttr != nil && cmd.SysProcAttr.Setpgid {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	} else {
		cmd.Process.Kill()
	}
	<-done
}
