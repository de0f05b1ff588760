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

// Package cluster is a one-node Kubernetes cluster on this machine for the
// tests that install the product the way users do: a real control plane
// (testenv.ControlPlane), a private containerd with a pod network, and the
// real kubelet registered as a Node; Helm and kubectl of the pinned
// versions drive it. Everything is on loopback or on the pod network's
// host-only bridge.
package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
)

// Options configure a cluster.
type Options struct {
	Dir     string
	Kubelet string // the kubelet binary; testenv.KubeletBinary when empty
	Helm    string // the helm binary; $HELM when empty
	Log     io.Writer
	// MinContainerTTL and FeatureGates are the kubelet's
	// (testenv.KubeletOptions).
	MinContainerTTL time.Duration
	FeatureGates    map[string]bool
	// Runtime is the containerd the kubelet runs on (Debian's when empty;
	// testenv.ContainerdOptions.Binaries for a built one), always with a
	// pod network.
	Runtime testenv.ContainerdOptions
}

// Cluster is a running one-node cluster.
type Cluster struct {
	Dir          string
	ControlPlane *testenv.ControlPlane
	Containerd   *testenv.Containerd
	Kubelet      *testenv.Kubelet
	helm         string
	log          io.Writer
	monitoring   *Monitoring
}

// Node is the name the kubelet registers.
const Node = testenv.KubeletNode

// Start brings the cluster up: the control plane, containerd, the kubelet,
// and waits until the Node is Ready.
func Start(ctx context.Context, o Options) (c *Cluster, err error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Dir, err = filepath.Abs(o.Dir); err != nil {
		return nil, err
	}
	if o.Helm == "" {
		o.Helm = os.Getenv("HELM")
	}
	if o.Helm == "" {
		return nil, fmt.Errorf("%w: HELM is not set (make test builds Helm into .tools/ and sets it)", testenv.ErrUnavailable)
	}
	bins, err := testenv.FindControlPlane()
	if err != nil {
		return nil, err
	}
	c = &Cluster{Dir: o.Dir, helm: o.Helm, log: o.Log}
	started := c
	defer func() {
		if err != nil {
			started.Stop()
		}
	}()
	t0 := time.Now()
	if c.ControlPlane, err = testenv.StartControlPlane(filepath.Join(o.Dir, "control-plane"), bins); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Log, "control plane %s ready at %s in %v\n", testenv.KubeletVersion, c.ControlPlane.Server, since(t0))
	rt := o.Runtime
	rt.PodNetwork = true
	if c.Containerd, err = testenv.StartContainerdWith(filepath.Join(o.Dir, "containerd"), rt); err != nil {
		return nil, err
	}
	t1 := time.Now()
	if c.Kubelet, err = testenv.StartKubelet(testenv.KubeletOptions{
		Binary: o.Kubelet, Dir: filepath.Join(o.Dir, "kubelet"), Runtime: c.Containerd,
		ControlPlane: c.ControlPlane, MinContainerTTL: o.MinContainerTTL, FeatureGates: o.FeatureGates,
	}); err != nil {
		return nil, err
	}
	if err := c.WaitNodeCondition(ctx, corev1.NodeReady, corev1.ConditionTrue, 2*time.Minute); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Log, "node %s Ready in %v (kubelet on %s, log %s)\n", Node, since(t1), c.Kubelet.NodeIP, c.Kubelet.LogPath)
	return c, nil
}

func since(t time.Time) time.Duration { return time.Since(t).Round(10 * time.Millisecond) }

// Kubectl runs the pinned kubectl as the cluster's admin.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) ([]byte, error) {
	return c.ControlPlane.Kubectl(ctx, args...)
}

// Helm runs the pinned Helm as the cluster's admin, with its cache, config
// and data in the cluster's directory (nothing of the user's is read or
// written).
func (c *Cluster) Helm(ctx context.Context, args ...string) ([]byte, error) {
	home := filepath.Join(c.Dir, "helm")
	cmd := exec.CommandContext(ctx, c.helm, append([]string{"--kubeconfig", c.ControlPlane.AdminKubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	return testenv.Output(cmd, "helm", args)
}

// Get decodes `kubectl get ARGS -o json` into v.
func (c *Cluster) Get(ctx context.Context, v any, args ...string) error {
	out, err := c.Kubectl(ctx, append(append([]string{"get"}, args...), "-o", "json")...)
	if err != nil {
		return err
	}
	return json.Unmarshal(out, v)
}

// NodeCondition is the Node's condition of type typ, as the API server has
// it.
func (c *Cluster) NodeCondition(ctx context.Context, typ corev1.NodeConditionType) (corev1.NodeCondition, error) {
	var node corev1.Node
	if err := c.Get(ctx, &node, "node", Node); err != nil {
		return corev1.NodeCondition{}, err
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == typ {
			return cond, nil
		}
	}
	return corev1.NodeCondition{}, fmt.Errorf("node %s has no %s condition", Node, typ)
}

// WaitNodeCondition polls the Node until its condition typ has status.
func (c *Cluster) WaitNodeCondition(ctx context.Context, typ corev1.NodeConditionType, status corev1.ConditionStatus, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for {
		cond, err := c.NodeCondition(ctx, typ)
		if err == nil && cond.Status == status {
			return nil
		}
		last = fmt.Sprintf("%s=%s %s: %s (%v)", cond.Type, cond.Status, cond.Reason, cond.Message, err)
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("node %s: no %s=%s within %v: last %s\n%s", Node, typ, status, timeout, last, c.Kubelet.LogTail(20))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// Stop stops the kubelet (its pods go with it), containerd and the control
// plane, and puts the host back.
func (c *Cluster) Stop() error {
	errs := []error{c.monitoring.stop()}
	if c.Kubelet != nil {
		errs = append(errs, c.Kubelet.Stop())
	}
	if c.Containerd != nil {
		errs = append(errs, c.Containerd.Stop())
	}
	if c.ControlPlane != nil {
		errs = append(errs, c.ControlPlane.Stop())
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
