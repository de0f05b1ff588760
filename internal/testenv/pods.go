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
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PodClient creates pods and containers through the CRI the way the kubelet
// does: the same labels, annotations, metadata and log layout, host network.
type PodClient struct {
	RS     runtimeapi.RuntimeServiceClient
	LogDir string
	seq    int
}

// Pod is a sandbox the harness created.
type Pod struct {
	ID        string
	Name      string
	Namespace string
	UID       string
	config    *runtimeapi.PodSandboxConfig
}

// RunPod starts a host-network sandbox.
func (k *PodClient) RunPod(ctx context.Context, namespace, name string) (*Pod, error) {
	k.seq++
	uid := fmt.Sprintf("%08x-0000-4000-8000-%012x", k.seq, time.Now().UnixNano()&0xffffffffffff)
	logDir := filepath.Join(k.LogDir, fmt.Sprintf("%s_%s_%s", namespace, name, uid))
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: namespace, Uid: uid},
		LogDirectory: logDir,
		Labels: map[string]string{
			"io.kubernetes.pod.name":      name,
			"io.kubernetes.pod.namespace": namespace,
			"io.kubernetes.pod.uid":       uid,
			"app":                         strings.SplitN(name, "-", 2)[0],
		},
		Annotations: map[string]string{
			"kubernetes.io/config.source": "api",
			"kubernetes.io/config.seen":   time.Now().UTC().Format(time.RFC3339Nano),
		},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD},
			},
		},
	}
	resp, err := k.RS.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		return nil, fmt.Errorf("run pod %s/%s: %w", namespace, name, err)
	}
	return &Pod{ID: resp.GetPodSandboxId(), Name: name, Namespace: namespace, UID: uid, config: cfg}, nil
}

// NewSandbox gives pod a new sandbox, as the kubelet does when the old one
// died: the same pod (uid, names, log directory), the next attempt. The old
// sandbox is left as it is (stop it first for the kubelet's order).
func (k *PodClient) NewSandbox(ctx context.Context, pod *Pod) (*Pod, error) {
	cfg := proto.Clone(pod.config).(*runtimeapi.PodSandboxConfig)
	cfg.Metadata.Attempt++
	resp, err := k.RS.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		return nil, fmt.Errorf("run pod %s/%s attempt %d: %w", pod.Namespace, pod.Name, cfg.Metadata.Attempt, err)
	}
	return &Pod{ID: resp.GetPodSandboxId(), Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, config: cfg}, nil
}

// ExistingPod is a host-network sandbox someone else made (the kubelet's
// own static pods), for CreateContainer: containers go in with its pod's
// identity and no log directory.
func ExistingPod(s *runtimeapi.PodSandbox) *Pod {
	md := s.GetMetadata()
	return &Pod{ID: s.GetId(), Name: md.GetName(), Namespace: md.GetNamespace(), UID: md.GetUid(), config: &runtimeapi.PodSandboxConfig{
		Metadata: proto.Clone(md).(*runtimeapi.PodSandboxMetadata),
		Labels:   s.GetLabels(),
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD},
			},
		},
	}}
}

// ContainerSpec says what to run and how far to take it.
type ContainerSpec struct {
	Name    string
	Command []string // default: the image's sleep
	Start   bool     // false leaves it CREATED
	Attempt uint32
	// ExtraAnnotations are added to the kubelet's own (e.g. a large one to
	// push ListContainers past the limit).
	ExtraAnnotations map[string]string
}

// CreateContainer creates (and optionally starts) a container in pod.
func (k *PodClient) CreateContainer(ctx context.Context, pod *Pod, spec ContainerSpec) (string, error) {
	ann := map[string]string{
		"io.kubernetes.container.hash":                     fmt.Sprintf("%08x", len(spec.Name)*7919+int(spec.Attempt)),
		"io.kubernetes.container.restartCount":             fmt.Sprint(spec.Attempt),
		"io.kubernetes.container.terminationMessagePath":   "/dev/termination-log",
		"io.kubernetes.container.terminationMessagePolicy": "File",
		"io.kubernetes.pod.terminationGracePeriod":         "30",
	}
	for k, v := range spec.ExtraAnnotations {
		ann[k] = v
	}
	cfg := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: spec.Name, Attempt: spec.Attempt},
		Image:    &runtimeapi.ImageSpec{Image: Image},
		Command:  spec.Command,
		Labels: map[string]string{
			"io.kubernetes.pod.name":       pod.Name,
			"io.kubernetes.pod.namespace":  pod.Namespace,
			"io.kubernetes.pod.uid":        pod.UID,
			"io.kubernetes.container.name": spec.Name,
		},
		Annotations: ann,
		LogPath:     fmt.Sprintf("%s/%d.log", spec.Name, spec.Attempt),
		Linux: &runtimeapi.LinuxContainerConfig{
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD},
			},
		},
	}
	resp, err := k.RS.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: pod.ID, Config: cfg, SandboxConfig: pod.config})
	if err != nil {
		return "", fmt.Errorf("create container %s in %s: %w", spec.Name, pod.Name, err)
	}
	id := resp.GetContainerId()
	if spec.Start {
		if _, err := k.RS.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
			return id, fmt.Errorf("start container %s: %w", spec.Name, err)
		}
	}
	return id, nil
}

// StopPod stops a sandbox and its containers: it turns NOTREADY.
func (k *PodClient) StopPod(ctx context.Context, pod *Pod) error {
	_, err := k.RS.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: pod.ID})
	return err
}

// RemoveContainer removes one container.
func (k *PodClient) RemoveContainer(ctx context.Context, id string) error {
	_, err := k.RS.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id})
	return err
}

// WaitState waits until a container reaches state.
func (k *PodClient) WaitState(ctx context.Context, id string, state runtimeapi.ContainerState) error {
	for {
		resp, err := k.RS.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
		if err == nil && resp.GetStatus().GetState() == state {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("container %s never reached %v: %v", id, state, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
