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

// Package testenv starts private container runtimes for integration tests
// and the demo: a containerd and a dockerd, each with its own root, state,
// socket and pid file under one directory. It never touches a system daemon
// or the default sockets, and stops exactly the processes it started.
package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ErrUnavailable explains why a private runtime cannot run here (not root,
// binaries missing); tests skip on it outside CI.
var ErrUnavailable = errors.New("private runtime unavailable")

// Image is the local image every private runtime gets: busybox-static with
// CMD sleep, also used as the sandbox ("pause") image. No registry is needed.
const Image = "docker.io/pleg-test/busybox:1"

// Containerd is a private containerd with its CRI plugin.
type Containerd struct {
	Dir    string
	Socket string
	// Bridge and Subnet are the pod network (ContainerdOptions.PodNetwork).
	Bridge string
	Subnet string
	// SkipPodRemoval makes Stop kill the daemon and its shims without
	// removing every pod through the CRI first (thousands of containers
	// take minutes to remove one by one; the directory goes anyway).
	SkipPodRemoval bool
	// binaries is ContainerdOptions.Binaries.
	binaries string
	ledger   *ledger
	cmd      *exec.Cmd
	log      *os.File
	done     chan struct{}
}

// ContainerdOptions change what a private containerd offers.
type ContainerdOptions struct {
	// PodNetwork gives pods off the host network an address on a bridge of
	// their own, through Debian's CNI plugins (bridge + host-local in
	// /usr/lib/cni). The bridge, the addresses it hands out and the
	// forwarding sysctl the bridge plugin turns on are undone by Stop.
	PodNetwork bool
	// Binaries is a directory holding a containerd 2.x and its
	// containerd-shim-runc-v2 (Containerd2Dir), run instead of Debian's
	// containerd 1.6 with a version 3 configuration; its shim comes first
	// in the daemon's PATH. Empty: Debian's containerd from PATH.
	Binaries string
	// V1 says the Binaries are a containerd 1.x (Containerd17Dir): it
	// gets the version 2 configuration Debian's 1.6 gets, with its NRI
	// socket (1.7 has NRI, off by default) in its own directory.
	V1 bool
}

// Containerd2Version is the containerd 2.x the tests run beside Debian's
// 1.6: built from the Go module proxy by scripts/build-containerd.sh into
// .tools/containerd-<version> (make test does it, once).
const Containerd2Version = "v2.4.2"

// Containerd17Version is the containerd 1.7 the tests run beside it, the
// release most nodes in the field run; built the same way.
const Containerd17Version = "v1.7.35"

// Containerd2Dir returns the directory of the containerd 2.x build the
// tests run: $CONTAINERD2 (make test sets it to the cached build). The error
// wraps ErrUnavailable.
func Containerd2Dir() (string, error) { return containerdBuild("CONTAINERD2", Containerd2Version) }

// Containerd17Dir is Containerd2Dir for containerd 1.7: $CONTAINERD17.
func Containerd17Dir() (string, error) { return containerdBuild("CONTAINERD17", Containerd17Version) }

// containerdBuild checks the containerd build named by the environment
// variable env.
func containerdBuild(env, version string) (string, error) {
	p := os.Getenv(env)
	if p == "" {
		return "", fmt.Errorf("%w: %s is not set (make test builds containerd %s into .tools/ and sets it)", ErrUnavailable, env, version)
	}
	for _, b := range []string{"containerd", "containerd-shim-runc-v2"} {
		if _, err := os.Stat(filepath.Join(p, b)); err != nil {
			return "", fmt.Errorf("%w: containerd %s: %v (make test builds it)", ErrUnavailable, version, err)
		}
	}
	return p, nil
}

// CNIBinDir is where Debian's containernetworking-plugins installs them.
const CNIBinDir = "/usr/lib/cni"

// Config renders the containerd configuration for a private instance in dir.
// restrict_oom_score_adj lets the CRI start sandboxes in an unprivileged VM;
// host-network pods need no CNI.
// netns_mounts_under_state_dir keeps the pods' network namespaces below
// dir instead of /var/run/netns, so Stop (or the next run) unmounts them.
func containerdConfig(dir, cniBin string) string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.opt"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.grpc.v1.cri"]
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  sandbox_image = %[5]q
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[6]q
    conf_dir = %[7]q
    max_conf_num = 1
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), filepath.Join(dir, "containerd.sock"),
		filepath.Join(dir, "containerd.sock.ttrpc"), Image, cniBin, filepath.Join(dir, "cni", "conf"))
}

// containerd2Config is containerdConfig in containerd 2.x's version 3
// format: the CRI plugin is split into images, runtime and the gRPC server,
// and no host configuration is imported. Its NRI socket, by default in
// /var/run/nri and left there at exit, is in dir.
func containerd2Config(dir, cniBin string) string {
	return fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
imports = []
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.erofs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.opt"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.cri.v1.images".pinned_images]
  sandbox = %[5]q

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [%[6]q]
    conf_dir = %[7]q
    max_conf_num = 1

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[plugins."io.containerd.nri.v1.nri"]
  socket_path = %[8]q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), filepath.Join(dir, "containerd.sock"),
		filepath.Join(dir, "containerd.sock.ttrpc"), Image, cniBin, filepath.Join(dir, "cni", "conf"),
		filepath.Join(dir, "nri.sock"))
}

// podNetwork names the bridge and subnet of the private containerd in dir:
// derived from dir, so two instances do not share them, and a /24 of
// 10.254/16 that no route of the host's covers yet (a network the host
// already reaches is not taken over).
func podNetwork(dir string) (bridge, subnet string, err error) {
	h := crc32.ChecksumIEEE([]byte(dir))
	routes, _ := os.ReadFile("/proc/net/route")
	for i := uint32(0); i < 250; i++ {
		n := (h+i)%250 + 1
		if !routed(string(routes), [4]byte{10, 254, byte(n), 0}) {
			return fmt.Sprintf("plegbr%08x", h)[:14], fmt.Sprintf("10.254.%d.0/24", n), nil
		}
	}
	return "", "", fmt.Errorf("%w: every /24 of 10.254.0.0/16 is routed on this host", ErrUnavailable)
}

// routed reports whether a route of /proc/net/route other than the default
// one overlaps the /24 at net.
func routed(table string, net [4]byte) bool {
	lines := strings.Split(table, "\n")
	for _, line := range lines[min(1, len(lines)):] {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		var dst, mask uint32
		fmt.Sscanf(f[1], "%x", &dst)
		fmt.Sscanf(f[7], "%x", &mask)
		if mask == 0 {
			continue
		}
		// /proc/net/route is little-endian: the first octet is the low byte.
		ours := uint32(net[0]) | uint32(net[1])<<8 | uint32(net[2])<<16
		ourMask := uint32(0x00ffffff)
		m := mask & ourMask
		if dst&m == ours&m {
			return true
		}
	}
	return false
}

func cniConfig(dir, bridge, subnet string) string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "pleg-test",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q}]],
        "dataDir": %q
      }
    },
    {"type": "loopback"}
  ]
}
`, bridge, subnet, filepath.Join(dir, "cni", "ipam"))
}

// Check reports whether private runtimes can run on this machine.
func Check(binaries ...string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: needs root (run make test as root)", ErrUnavailable)
	}
	for _, b := range binaries {
		if _, err := exec.LookPath(b); err != nil {
			return fmt.Errorf("%w: %s not installed (make deps installs it)", ErrUnavailable, b)
		}
	}
	return nil
}

// StartContainerd starts a private containerd in dir and imports the test
// image into its k8s.io namespace.
func StartContainerd(dir string) (*Containerd, error) {
	return StartContainerdWith(dir, ContainerdOptions{})
}

// StartContainerdWith is StartContainerd with options.
func StartContainerdWith(dir string, opts ContainerdOptions) (*Containerd, error) {
	if err := containerdPrereqs(opts); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	cfg, err := writeContainerdConfig(dir, opts)
	if err != nil {
		return nil, err
	}
	c := &Containerd{Dir: dir, Socket: filepath.Join(dir, "containerd.sock"), binaries: opts.Binaries}
	l, err := newLedger("containerd", dir)
	if err != nil {
		return nil, err
	}
	l.Socket, l.Marker = c.Socket, cfg
	if opts.PodNetwork {
		if c.Bridge, c.Subnet, err = podNetwork(dir); err != nil {
			return nil, err
		}
		// The bridge plugin turns IPv4 forwarding on for a gateway bridge.
		l.Sysctls = saveSysctls("net.ipv4.ip_forward")
		l.SetTo = map[string]string{"net.ipv4.ip_forward": "1"}
		l.Links = []string{c.Bridge}
		if err := os.WriteFile(filepath.Join(dir, "cni", "conf", "10-pleg-test.conflist"), []byte(cniConfig(dir, c.Bridge, c.Subnet)), 0o600); err != nil {
			return nil, err
		}
	}
	// containerd keeps shim sockets and runc state under /run/containerd
	// whatever its config says, go-cni caches results in /var/lib/cni, and
	// sandboxes without a cgroup parent go to the /k8s.io cgroup: shared
	// with the other daemons running at once (shared.go).
	if err := claimShared(dir, containerdShared()...); err != nil {
		return nil, err
	}
	c.ledger = l
	if err := c.start(); err != nil {
		l.undo()
		return nil, err
	}
	tar := filepath.Join(dir, "image.tar")
	if err := WriteImageTar(tar, Image); err != nil {
		c.Stop()
		return nil, err
	}
	if err := c.ImportImage(tar); err != nil {
		c.Stop()
		return nil, fmt.Errorf("import test image: %w", err)
	}
	return c, nil
}

// ImportImage imports a docker-archive tarball into the k8s.io namespace,
// where the kubelet finds its images.
func (c *Containerd) ImportImage(tar string) error {
	if out, err := exec.Command("ctr", "--address", c.Socket, "-n", "k8s.io", "images", "import", tar).CombinedOutput(); err != nil {
		return fmt.Errorf("ctr images import %s: %v: %s", filepath.Base(tar), err, out)
	}
	return nil
}

// containerdPrereqs says what is missing to start a containerd with
// opts, as ErrUnavailable.
func containerdPrereqs(opts ContainerdOptions) error {
	need := []string{"containerd", "runc", "ctr", "busybox"}
	if opts.Binaries != "" {
		need = need[1:] // Debian's ctr imports the image; runc is Debian's
		for _, b := range []string{"containerd", "containerd-shim-runc-v2"} {
			if _, err := os.Stat(filepath.Join(opts.Binaries, b)); err != nil {
				return fmt.Errorf("%w: %v", ErrUnavailable, err)
			}
		}
	}
	if err := Check(need...); err != nil {
		return err
	}
	if opts.PodNetwork {
		if err := Check("ip"); err != nil {
			return err
		}
		for _, p := range []string{"bridge", "host-local", "loopback"} {
			if _, err := os.Stat(filepath.Join(CNIBinDir, p)); err != nil {
				return fmt.Errorf("%w: CNI plugin %s not installed (containernetworking-plugins; make deps installs it)", ErrUnavailable, p)
			}
		}
	}
	return nil
}

// writeContainerdConfig makes the daemon's directories under dir and its
// config, which it returns the path of.
func writeContainerdConfig(dir string, opts ContainerdOptions) (string, error) {
	for _, d := range []string{"root", "state", "cni/bin", "cni/conf"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return "", err
		}
	}
	// Without a pod network the CNI directories stay empty.
	cniBin := filepath.Join(dir, "cni", "bin")
	if opts.PodNetwork {
		cniBin = CNIBinDir
	}
	cfg := filepath.Join(dir, "config.toml")
	config := containerdConfig(dir, cniBin)
	switch {
	case opts.Binaries != "" && opts.V1:
		config += fmt.Sprintf("\n[plugins.\"io.containerd.nri.v1.nri\"]\n  socket_path = %q\n", filepath.Join(dir, "nri.sock"))
	case opts.Binaries != "":
		config = containerd2Config(dir, cniBin)
	}
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		return "", err
	}
	return cfg, nil
}

func (c *Containerd) start() error {
	log, err := os.OpenFile(filepath.Join(c.Dir, "containerd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	raiseFileLimit()
	cmd := exec.Command("containerd", "--config", filepath.Join(c.Dir, "config.toml"))
	if c.binaries != "" {
		// Its own shim first: containerd starts containerd-shim-runc-v2 from PATH.
		cmd.Path = filepath.Join(c.binaries, "containerd")
		cmd.Env = append(os.Environ(), "PATH="+c.binaries+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	cmd.Stdout, cmd.Stderr = log, log
	// Own process group: a Ctrl-C to the test does not reach it first, and
	// Stop can signal exactly it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start containerd: %w", err)
	}
	os.WriteFile(filepath.Join(c.Dir, "containerd.pid"), []byte(fmt.Sprint(cmd.Process.Pid)), 0o600)
	c.cmd, c.log, c.done = cmd, log, make(chan struct{})
	if c.ledger != nil {
		c.ledger.Pid = cmd.Process.Pid
		if err := c.ledger.save(); err != nil {
			c.kill()
			return fmt.Errorf("record the private containerd in %s: %w", LedgerDir, err)
		}
	}
	go func() { cmd.Wait(); close(c.done) }()
	if err := c.waitReady(60 * time.Second); err != nil {
		c.kill()
		return fmt.Errorf("%w; log: %s", err, tail(filepath.Join(c.Dir, "containerd.log")))
	}
	return nil
}

// raiseFileLimit gives the daemons the harness starts the open-file limit
// their systemd units give them (containerd.service: LimitNOFILE=infinity).
// containerd holds two FIFOs open for every container it has created, so a
// node of thousands of never-started containers needs it. Setting the limit
// here also keeps Go from handing children its original soft limit.
func raiseFileLimit() {
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) != nil || lim.Cur >= 1<<20 {
		return
	}
	want := syscall.Rlimit{Cur: 1 << 20, Max: max(lim.Max, 1<<20)}
	if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want) != nil {
		want.Cur = lim.Max
		want.Max = lim.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want)
	}
}

func (c *Containerd) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-c.done:
			return errors.New("containerd exited during start-up")
		default:
		}
		cc, err := c.Dial(256 << 20)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err = runtimeapi.NewRuntimeServiceClient(cc).Version(ctx, &runtimeapi.VersionRequest{})
			cancel()
			cc.Close()
			if err == nil {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("containerd CRI not ready after %s: %v", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Endpoint is the CRI endpoint URL.
func (c *Containerd) Endpoint() string { return "unix://" + c.Socket }

// Pid is the containerd process id.
func (c *Containerd) Pid() int { return c.cmd.Process.Pid }

// Dial opens an unrestricted CRI connection with the given receive limit
// (the harness's own client, not the exporter's).
func (c *Containerd) Dial(maxRecv int) (*grpc.ClientConn, error) {
	return dialSocket(c.Socket, maxRecv)
}

func dialSocket(socket string, maxRecv int) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxRecv)))
}

// Freeze stops the daemon with SIGSTOP: it keeps its socket but answers nothing.
func (c *Containerd) Freeze() error { return c.cmd.Process.Signal(syscall.SIGSTOP) }

// Thaw resumes a frozen daemon.
func (c *Containerd) Thaw() error { return c.cmd.Process.Signal(syscall.SIGCONT) }

// Crash kills the daemon with SIGKILL, leaving its state behind as a crash would.
func (c *Containerd) Crash() {
	c.kill()
}

// Restart starts the daemon again on the same directories after Crash.
func (c *Containerd) Restart() error { return c.start() }

func (c *Containerd) kill() {
	if c.cmd == nil {
		return
	}
	c.cmd.Process.Signal(syscall.SIGCONT)
	c.cmd.Process.Kill()
	<-c.done
	c.log.Close()
}

// Stop removes every pod it created through the CRI, stops the daemon and
// the shims it started, unmounts what is left and deletes the directory.
func (c *Containerd) Stop() error {
	if c.cmd != nil {
		c.cmd.Process.Signal(syscall.SIGCONT)
		if !c.SkipPodRemoval {
			if cc, err := c.Dial(256 << 20); err == nil {
				removeAllPods(runtimeapi.NewRuntimeServiceClient(cc))
				cc.Close()
			}
		}
		c.Terminate()
	}
	if c.ledger != nil {
		// The shims, the mounts and the directory, the bridge and the
		// forwarding sysctls; then the record itself.
		return c.ledger.undo()
	}
	killShims(c.Socket)
	unmountUnder(c.Dir)
	return os.RemoveAll(c.Dir)
}

// removeAllPods stops and removes every sandbox (and so its containers),
// each call with a deadline of its own.
func removeAllPods(rs runtimeapi.RuntimeServiceClient) {
	call := func(f func(context.Context)) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		f(ctx)
	}
	var items []*runtimeapi.PodSandbox
	call(func(ctx context.Context) {
		if resp, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); err == nil {
			items = resp.GetItems()
		}
	})
	for _, s := range items {
		call(func(ctx context.Context) {
			rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: s.GetId()})
		})
		call(func(ctx context.Context) {
			rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: s.GetId()})
		})
	}
}

// killShims kills the containerd-shim processes serving our socket only.
func killShims(socket string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) == 0 || !strings.Contains(filepath.Base(args[0]), "containerd-shim") {
			continue
		}
		for i, a := range args {
			if a == "-address" && i+1 < len(args) && args[i+1] == socket {
				var pid int
				fmt.Sscan(e.Name(), &pid)
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// unmountUnder lazily unmounts every mount below dir, deepest first.
func unmountUnder(dir string) {
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var mounts []string
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			mounts = append(mounts, f[4])
		}
	}
	for i := len(mounts) - 1; i >= 0; i-- {
		syscall.Unmount(mounts[i], syscall.MNT_DETACH)
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(bytes.TrimSpace(b))
}

// Gateway is the pod network's gateway address on the host (the first of
// Subnet), on the bridge the CNI bridge plugin would make at the first pod:
// made now if it is not there yet (the plugin takes it as it finds it), so
// a kubelet can listen on it before any pod runs. Stop deletes the bridge.
func (c *Containerd) Gateway() (string, error) {
	if c.Bridge == "" {
		return "", errors.New("containerd: no pod network (ContainerdOptions.PodNetwork)")
	}
	_, ipnet, err := net.ParseCIDR(c.Subnet)
	if err != nil {
		return "", err
	}
	gw := ipnet.IP.To4()
	gw[3]++
	if linkExists(c.Bridge) {
		return gw.String(), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ones, _ := ipnet.Mask.Size()
	for _, args := range [][]string{
		{"link", "add", c.Bridge, "type", "bridge"},
		{"addr", "add", fmt.Sprintf("%s/%d", gw, ones), "dev", c.Bridge},
		{"link", "set", c.Bridge, "up"},
	} {
		if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
			return "", fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return gw.String(), nil
}
