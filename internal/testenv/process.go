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
	"os/exec"
	"path/filepath"
	"strings"
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

// Daemon is a process the harness started and recorded in LedgerDir, so the
// next run stops it (and removes its directory) after a killed one. Its
// output goes to KIND.log beside Dir, which outlives it.
type Daemon struct {
	Kind    string
	Dir     string // its own: data, generated certificates, the log
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
	log     *os.File
	ledger  *ledger
}

// StartDaemon records and starts bin with args; marker is the one of args
// that names dir (checked before a later run signals the pid).
func StartDaemon(kind, dir, bin, marker string, args ...string) (*Daemon, error) {
	if !strings.Contains(marker, dir) || !containsArg(args, marker) {
		return nil, fmt.Errorf("%s: marker %q is not an argument naming %s", kind, marker, dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	l, err := newLedger(kind, dir)
	if err != nil {
		return nil, err
	}
	l.Marker = marker
	if err := l.save(); err != nil {
		return nil, fmt.Errorf("record %s in %s: %w", kind, LedgerDir, err)
	}
	d := &Daemon{Kind: kind, Dir: dir, LogPath: filepath.Join(filepath.Dir(dir), kind+".log"), ledger: l}
	if d.log, err = os.OpenFile(d.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
		l.remove()
		return nil, err
	}
	d.cmd = exec.Command(bin, args...)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		d.log.Close()
		l.remove()
		return nil, fmt.Errorf("start %s: %w", kind, err)
	}
	d.done = make(chan struct{})
	go func() { d.cmd.Wait(); close(d.done) }()
	l.Pid = d.cmd.Process.Pid
	return d, l.save()
}

func containsArg(args []string, a string) bool {
	for _, x := range args {
		if x == a {
			return true
		}
	}
	return false
}

// Exited reports whether the process has ended.
func (d *Daemon) Exited() bool { return closed(d.done) }

// closed reports whether done is closed (the process waited for has ended).
func closed(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// Stop ends the process (SIGTERM, SIGKILL after 15 s) and undoes its record:
// its directory goes.
func (d *Daemon) Stop() error {
	if d == nil {
		return nil
	}
	StopProcess(d.cmd, d.done, 15*time.Second)
	d.log.Close()
	return d.ledger.undo()
}

// LastLines is the end of the daemon's log, for an error that says why it
// did not start.
func (d *Daemon) LastLines(n int) string { return tailFile(d.LogPath, n) }

// tailFile is the last n lines of a log file (what there is of it).
func tailFile(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
