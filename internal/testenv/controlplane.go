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
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// EtcdVersion is the etcd the control plane runs (Kubernetes 1.37 pins
// 3.7.0): go.etcd.io/etcd/server/v3, built from the module proxy by
// scripts/build-module.sh into .tools/etcd-<version> (make test does it).
const EtcdVersion = "v3.7.4"

// ServiceCIDR is the cluster's service address range; the API server's
// certificate names its first address, as kubeadm's does.
const (
	ServiceCIDR      = "10.96.0.0/16"
	kubernetesSvcIP  = "10.96.0.1"
	serviceAccountIs = "https://kubernetes.default.svc.cluster.local"
)

// ControlPlaneBinaries are the control plane's commands: kube-apiserver,
// kube-controller-manager, kube-scheduler and kubectl from $KUBERNETES (the
// directory make test builds them into, with the kubelet), etcd from $ETCD.
// The error wraps ErrUnavailable.
type ControlPlaneBinaries struct {
	APIServer, ControllerManager, Scheduler, Kubectl, Etcd string
}

// FindControlPlane locates the binaries through $KUBERNETES and $ETCD.
func FindControlPlane() (ControlPlaneBinaries, error) {
	var b ControlPlaneBinaries
	if why := os.Getenv("KUBELET_UNAVAILABLE"); why != "" {
		return b, fmt.Errorf("%w: %s", ErrUnavailable, why)
	}
	k8s, etcd := os.Getenv("KUBERNETES"), os.Getenv("ETCD")
	if k8s == "" || etcd == "" {
		return b, fmt.Errorf("%w: KUBERNETES or ETCD is not set (make test builds Kubernetes %s and etcd %s into .tools/ and sets them)",
			ErrUnavailable, KubeletVersion, EtcdVersion)
	}
	b = ControlPlaneBinaries{
		APIServer:         filepath.Join(k8s, "kube-apiserver"),
		ControllerManager: filepath.Join(k8s, "kube-controller-manager"),
		Scheduler:         filepath.Join(k8s, "kube-scheduler"),
		Kubectl:           filepath.Join(k8s, "kubectl"),
		Etcd:              etcd,
	}
	for _, p := range []string{b.APIServer, b.ControllerManager, b.Scheduler, b.Kubectl, b.Etcd} {
		if _, err := os.Stat(p); err != nil {
			return b, fmt.Errorf("%w: %v (make test builds it)", ErrUnavailable, err)
		}
	}
	return b, nil
}

// ControlPlane is a real Kubernetes control plane on loopback: etcd (TLS,
// client certificates), kube-apiserver with the Node and RBAC authorizers and
// the NodeRestriction admission plugin, kube-controller-manager and
// kube-scheduler, each with a client certificate of the one CA the harness
// makes. Every process is recorded in LedgerDir, so a killed run's are
// stopped by the next.
type ControlPlane struct {
	Dir string
	// Server is the API server's URL; AdminKubeconfig a kubeconfig in
	// system:masters.
	Server          string
	AdminKubeconfig string
	bins            ControlPlaneBinaries
	pki             *pki
	daemons         []*Daemon
}

// StartControlPlane starts the control plane in dir and waits until the API
// server is ready and the controller manager and the scheduler are healthy.
func StartControlPlane(dir string, bins ControlPlaneBinaries) (cp *ControlPlane, err error) {
	if err := Check(); err != nil {
		return nil, err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	cp = &ControlPlane{Dir: dir, bins: bins, Server: fmt.Sprintf("https://127.0.0.1:%d", ports[2])}
	started := cp
	defer func() {
		if err != nil {
			started.Stop()
		}
	}()
	if err := cp.makePKI(); err != nil {
		return nil, fmt.Errorf("control plane certificates: %w", err)
	}
	etcd := fmt.Sprintf("https://127.0.0.1:%d", ports[0])
	if err := cp.startEtcd(etcd, fmt.Sprintf("http://127.0.0.1:%d", ports[1])); err != nil {
		return nil, err
	}
	if err := cp.startAPIServer(etcd, ports[2]); err != nil {
		return nil, err
	}
	if err := cp.startControllers(ports[3], ports[4]); err != nil {
		return nil, err
	}
	return cp, nil
}

// makePKI writes the CA, every component's certificate and kubeconfig, and
// the service account key pair.
func (cp *ControlPlane) makePKI() (err error) {
	if cp.pki, err = newPKI(filepath.Join(cp.Dir, "pki")); err != nil {
		return err
	}
	p := cp.pki
	certs := []struct {
		name, cn string
		orgs     []string
		hosts    []string
	}{
		{"etcd-server", "etcd-server", nil, []string{"127.0.0.1", "localhost"}},
		{"apiserver-etcd-client", "kube-apiserver-etcd-client", nil, nil},
		{"apiserver", "kube-apiserver", nil, []string{"127.0.0.1", "localhost", kubernetesSvcIP, "kubernetes",
			"kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}},
		{"apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}, nil},
		{"admin", "kubernetes-admin", []string{"system:masters"}, nil},
		{"controller-manager", "system:kube-controller-manager", nil, nil},
		{"scheduler", "system:kube-scheduler", nil, nil},
	}
	for _, c := range certs {
		if err := p.issue(c.name, c.cn, c.orgs, c.hosts...); err != nil {
			return err
		}
	}
	for _, name := range []string{"admin", "controller-manager", "scheduler"} {
		if _, err := p.kubeconfig(name, cp.Server); err != nil {
			return err
		}
	}
	cp.AdminKubeconfig = p.path("admin.kubeconfig")
	return p.serviceAccountKeys()
}

func (cp *ControlPlane) startEtcd(client, peer string) error {
	p, dir := cp.pki, filepath.Join(cp.Dir, "etcd")
	marker := "--data-dir=" + filepath.Join(dir, "data")
	d, err := StartDaemon("etcd", dir, cp.bins.Etcd, marker, marker,
		"--name=default",
		"--listen-client-urls="+client, "--advertise-client-urls="+client,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
		"--initial-cluster=default="+peer,
		"--cert-file="+p.path("etcd-server.crt"), "--key-file="+p.path("etcd-server.key"),
		"--client-cert-auth", "--trusted-ca-file="+p.CAFile(),
		"--log-level=warn")
	if err != nil {
		return err
	}
	cp.daemons = append(cp.daemons, d)
	return cp.waitHealthy(d, client+"/health", "apiserver-etcd-client", `"health":"true"`, time.Minute)
}

func (cp *ControlPlane) startAPIServer(etcd string, port int) error {
	p, dir := cp.pki, filepath.Join(cp.Dir, "kube-apiserver")
	marker := "--cert-dir=" + dir
	d, err := StartDaemon("kube-apiserver", dir, cp.bins.APIServer, marker, marker,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port),
		"--etcd-servers="+etcd, "--etcd-cafile="+p.CAFile(),
		"--etcd-certfile="+p.path("apiserver-etcd-client.crt"), "--etcd-keyfile="+p.path("apiserver-etcd-client.key"),
		"--tls-cert-file="+p.path("apiserver.crt"), "--tls-private-key-file="+p.path("apiserver.key"),
		"--client-ca-file="+p.CAFile(),
		"--kubelet-client-certificate="+p.path("apiserver-kubelet-client.crt"),
		"--kubelet-client-key="+p.path("apiserver-kubelet-client.key"),
		// The kubelet listens on its node IP (testenv.Kubelet.NodeIP); its
		// Hostname address, the Node's name, does not resolve.
		"--kubelet-preferred-address-types=InternalIP",
		"--service-account-key-file="+p.path("sa.pub"), "--service-account-signing-key-file="+p.path("sa.key"),
		"--service-account-issuer="+serviceAccountIs,
		"--service-cluster-ip-range="+ServiceCIDR,
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true", "--profiling=false", "--v=1")
	if err != nil {
		return err
	}
	cp.daemons = append(cp.daemons, d)
	return cp.waitHealthy(d, cp.Server+"/readyz", "admin", "ok", 2*time.Minute)
}

// startControllers starts the controller manager (every default
// controller, one service account credential each, the CA that signs the
// cluster's CSRs) and the scheduler, neither electing a leader.
func (cp *ControlPlane) startControllers(cmPort, schedPort int) error {
	p := cp.pki
	dir := filepath.Join(cp.Dir, "kube-controller-manager")
	marker := "--cert-dir=" + dir
	cm, err := StartDaemon("kube-controller-manager", dir, cp.bins.ControllerManager, marker, marker,
		"--kubeconfig="+p.path("controller-manager.kubeconfig"),
		"--authentication-kubeconfig="+p.path("controller-manager.kubeconfig"),
		"--authorization-kubeconfig="+p.path("controller-manager.kubeconfig"),
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", cmPort),
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+p.path("sa.key"), "--root-ca-file="+p.CAFile(),
		"--cluster-signing-cert-file="+p.CAFile(), "--cluster-signing-key-file="+p.path("ca.key"),
		"--service-cluster-ip-range="+ServiceCIDR,
		"--leader-elect=false", "--profiling=false", "--v=1")
	if err != nil {
		return err
	}
	cp.daemons = append(cp.daemons, cm)
	dir = filepath.Join(cp.Dir, "kube-scheduler")
	marker = "--cert-dir=" + dir
	sched, err := StartDaemon("kube-scheduler", dir, cp.bins.Scheduler, marker, marker,
		"--kubeconfig="+p.path("scheduler.kubeconfig"),
		"--authentication-kubeconfig="+p.path("scheduler.kubeconfig"),
		"--authorization-kubeconfig="+p.path("scheduler.kubeconfig"),
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", schedPort),
		"--leader-elect=false", "--profiling=false", "--v=1")
	if err != nil {
		return err
	}
	cp.daemons = append(cp.daemons, sched)
	if err := cp.waitHealthy(cm, fmt.Sprintf("https://127.0.0.1:%d/healthz", cmPort), "", "ok", time.Minute); err != nil {
		return err
	}
	return cp.waitHealthy(sched, fmt.Sprintf("https://127.0.0.1:%d/healthz", schedPort), "", "ok", time.Minute)
}

// waitHealthy polls url until its body holds want. With client, the
// request carries that certificate and the server's is checked against the
// CA; without, the server's own self-signed one is accepted (the controller
// manager's and the scheduler's /healthz, open to anyone).
func (cp *ControlPlane) waitHealthy(d *Daemon, url, client, want string, timeout time.Duration) error {
	hc, err := cp.httpClient(client)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	var last string
	for {
		if d.Exited() {
			return fmt.Errorf("%w: %s exited during start-up: %s", ErrUnavailable, d.Kind, d.LastLines(5))
		}
		code, body, err := get(hc, url)
		if err == nil && code == http.StatusOK && strings.Contains(body, want) {
			return nil
		}
		last = fmt.Sprintf("%d %q %v", code, body, err)
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %s not healthy after %v (%s: %s): %s", ErrUnavailable, d.Kind, timeout, url, last, d.LastLines(5))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (cp *ControlPlane) httpClient(client string) (*http.Client, error) {
	cfg := &tls.Config{InsecureSkipVerify: client == ""} //nolint:gosec // loopback /healthz of a self-signed test daemon
	if client != "" {
		ca, err := os.ReadFile(cp.pki.CAFile())
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca)
		pair, err := tls.LoadX509KeyPair(cp.pki.path(client+".crt"), cp.pki.path(client+".key"))
		if err != nil {
			return nil, err
		}
		cfg.RootCAs, cfg.Certificates = pool, []tls.Certificate{pair}
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}, nil
}

func get(hc *http.Client, url string) (int, string, error) {
	resp, err := hc.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(b), err
}

// NodeKubeconfig issues the credentials of a kubelet registering as node
// (CN system:node:NODE in system:nodes, which the Node authorizer and
// NodeRestriction scope to that node) and returns its kubeconfig.
func (cp *ControlPlane) NodeKubeconfig(node string) (string, error) {
	name := "node-" + node
	if err := cp.pki.issue(name, "system:node:"+node, []string{"system:nodes"}); err != nil {
		return "", err
	}
	return cp.pki.kubeconfig(name, cp.Server)
}

// CAFile is the cluster's CA certificate.
func (cp *ControlPlane) CAFile() string { return cp.pki.CAFile() }

// AdminCert is the admin's client certificate and key (system:masters), for
// a controller run beside the control plane (the Prometheus Operator).
func (cp *ControlPlane) AdminCert() (cert, key string) {
	return cp.pki.path("admin.crt"), cp.pki.path("admin.key")
}

// Kubectl runs the pinned kubectl as the admin; the error carries its
// stderr.
func (cp *ControlPlane) Kubectl(ctx context.Context, args ...string) ([]byte, error) {
	return cp.KubectlAs(ctx, cp.AdminKubeconfig, args...)
}

// KubectlAs runs kubectl with another kubeconfig (a node's).
func (cp *ControlPlane) KubectlAs(ctx context.Context, kubeconfig string, args ...string) ([]byte, error) {
	return Output(exec.CommandContext(ctx, cp.bins.Kubectl, append([]string{"--kubeconfig=" + kubeconfig}, args...)...), "kubectl", args)
}

// Output runs cmd and returns its standard output; the error names the
// command as name and args, and carries what it wrote to standard error.
func Output(cmd *exec.Cmd, name string, args []string) ([]byte, error) {
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// Logs is the end of each daemon's log, for a failing test.
func (cp *ControlPlane) Logs(lines int) string {
	var b strings.Builder
	for _, d := range cp.daemons {
		fmt.Fprintf(&b, "--- %s (%s)\n%s\n", d.Kind, d.LogPath, d.LastLines(lines))
	}
	return b.String()
}

// Stop stops the daemons in the reverse order of their start and removes
// the directory.
func (cp *ControlPlane) Stop() error {
	var errs []error
	for i := len(cp.daemons) - 1; i >= 0; i-- {
		errs = append(errs, cp.daemons[i].Stop())
	}
	cp.daemons = nil
	errs = append(errs, os.RemoveAll(cp.Dir))
	return errors.Join(errs...)
}
