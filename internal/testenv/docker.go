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
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
)

// Dockerd is a private Docker daemon (with the containerd it manages itself
// under its exec root).
type Dockerd struct {
	Dir    string
	Socket string
	API    *client.Client // unrestricted: the harness's own client
	cmd    *exec.Cmd
	log    *os.File
	done   chan struct{}
}

// StartDockerd starts a private dockerd in dir, without bridge, iptables or
// forwarding changes, and loads the test image. (--bridge=none alone still
// turns net.ipv4.ip_forward on: its bridge driver configures forwarding
// when it registers; --ip-forward=false leaves the host's setting alone.)
func StartDockerd(dir string) (*Dockerd, error) {
	if err := Check("dockerd", "containerd", "runc", "busybox"); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "root"), 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "daemon.json"), []byte("{}\n"), 0o600); err != nil {
		return nil, err
	}
	// dockerd keeps plugin sockets in /run/docker, its containerd's shims
	// theirs in /run/containerd, and containers go to the /docker cgroup,
	// whatever it is told: shared with the other daemons (shared.go).
	if err := claimShared(dir, dockerdShared()...); err != nil {
		return nil, err
	}
	d := &Dockerd{Dir: dir, Socket: filepath.Join(dir, "docker.sock")}
	if err := d.start(); err != nil {
		releaseShared(dir)
		return nil, err
	}
	api, err := client.NewClientWithOpts(client.WithHost("unix://"+d.Socket), client.WithAPIVersionNegotiation())
	if err != nil {
		d.Stop()
		return nil, err
	}
	d.API = api
	if err := d.waitReady(90 * time.Second); err != nil {
		d.Stop()
		return nil, err
	}
	tar := filepath.Join(dir, "image.tar")
	if err := WriteImageTar(tar, Image); err != nil {
		d.Stop()
		return nil, err
	}
	f, err := os.Open(tar)
	if err != nil {
		d.Stop()
		return nil, err
	}
	defer f.Close()
	resp, err := api.ImageLoad(context.Background(), f)
	if err != nil {
		d.Stop()
		return nil, fmt.Errorf("load test image: %w", err)
	}
	defer resp.Body.Close()
	// The load happens while the answer streams; read it to the end.
	body, err := io.ReadAll(resp.Body)
	if err != nil || bytes.Contains(body, []byte(`"error"`)) {
		d.Stop()
		return nil, fmt.Errorf("load test image: %v %s", err, body)
	}
	return d, nil
}

func (d *Dockerd) start() error {
	log, err := os.OpenFile(filepath.Join(d.Dir, "dockerd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	os.Remove(filepath.Join(d.Dir, "docker.pid"))
	cmd := exec.Command("dockerd",
		"--data-root", filepath.Join(d.Dir, "root"),
		"--exec-root", filepath.Join(d.Dir, "exec"),
		"--pidfile", filepath.Join(d.Dir, "docker.pid"),
		"--host", "unix://"+d.Socket,
		"--config-file", filepath.Join(d.Dir, "daemon.json"),
		"--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-masq=false", "--ip-forward=false", "--userland-proxy=false",
	)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start dockerd: %w", err)
	}
	d.cmd, d.log, d.done = cmd, log, make(chan struct{})
	go func() { cmd.Wait(); close(d.done) }()
	return nil
}

func (d *Dockerd) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-d.done:
			return fmt.Errorf("dockerd exited during start-up: %s", tail(filepath.Join(d.Dir, "dockerd.log")))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := d.API.Ping(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("dockerd not ready after %s: %v; log: %s", timeout, err, tail(filepath.Join(d.Dir, "dockerd.log")))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Endpoint is the Docker host URL.
func (d *Dockerd) Endpoint() string { return "unix://" + d.Socket }

// Restart stops and starts the daemon on the same data: Docker lists a
// container whose removal failed as dead only after it reloads its state.
func (d *Dockerd) Restart() error {
	d.stopDaemon()
	if err := d.start(); err != nil {
		return err
	}
	return d.waitReady(90 * time.Second)
}

func (d *Dockerd) stopDaemon() {
	if d.cmd == nil {
		return
	}
	StopProcess(d.cmd, d.done, 30*time.Second)
	d.log.Close()
	d.cmd = nil
}

// Stop removes every container, stops the daemon and its containerd, and
// deletes the directory.
func (d *Dockerd) Stop() error {
	if d.API != nil && d.cmd != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		unpinAll(d.Dir)
		if list, err := d.API.ContainerList(ctx, container.ListOptions{All: true}); err == nil {
			for _, c := range list {
				d.API.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
			}
		}
		cancel()
		d.API.Close()
	}
	d.stopDaemon()
	killShims(filepath.Join(d.Dir, "exec", "containerd", "containerd.sock"))
	removeShimLeftovers(filepath.Join(d.Dir, "exec", "containerd", "daemon"))
	unmountUnder(d.Dir)
	var errs []error
	for i := 0; i < 3; i++ {
		err := os.RemoveAll(d.Dir)
		if err == nil {
			errs = nil
			break
		}
		errs = append(errs, err)
		time.Sleep(time.Second)
		unmountUnder(d.Dir)
	}
	if _, err := releaseShared(d.Dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
