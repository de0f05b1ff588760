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

package fakecri

import (
	"fmt"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Spec describes a population the way a node accumulates one.
type Spec struct {
	Namespaces []string // default: default, kube-system, batch-jobs
	Ready      int      // ready sandboxes
	NotReady   int      // notready sandboxes
	Created    int
	Running    int
	Exited     int
	Unknown    int
	// PaddingBytes adds an annotation of this size to every container, to
	// push the answer past a limit with few containers.
	PaddingBytes int
}

// Generate builds kubelet-like sandboxes and containers: the labels and
// annotations the kubelet sets (pod name/namespace/uid, container name, hash,
// restart count, termination message path and policy, grace period, ports),
// 64-hex ids and sha256 image refs. Containers are spread over the
// sandboxes round-robin. Deterministic for a given spec.
func Generate(spec Spec) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
	ns := spec.Namespaces
	if len(ns) == 0 {
		ns = []string{"default", "kube-system", "batch-jobs"}
	}
	nsb := spec.Ready + spec.NotReady
	if nsb == 0 {
		nsb = 1
		spec.NotReady = 1
	}
	sandboxes := make([]*runtimeapi.PodSandbox, 0, nsb)
	for i := 0; i < nsb; i++ {
		state := runtimeapi.PodSandboxState_SANDBOX_READY
		if i >= spec.Ready {
			state = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
		}
		pod := fmt.Sprintf("worker-%08d-%s", 29218680+i, suffix(i))
		sandboxes = append(sandboxes, &runtimeapi.PodSandbox{
			Id:        hexID("sb", i),
			Metadata:  &runtimeapi.PodSandboxMetadata{Name: pod, Uid: uid(i), Namespace: ns[i%len(ns)], Attempt: 0},
			State:     state,
			CreatedAt: 1764000000000000000 + int64(i)*1e9,
			Labels: map[string]string{
				"io.kubernetes.pod.name":      pod,
				"io.kubernetes.pod.namespace": ns[i%len(ns)],
				"io.kubernetes.pod.uid":       uid(i),
				"job-name":                    "worker-" + fmt.Sprint(29218680+i),
				"controller-uid":              uid(i + 7),
			},
			Annotations: map[string]string{
				"kubernetes.io/config.source": "api",
				"kubernetes.io/config.seen":   "2026-11-30T10:00:00.000000000Z",
			},
			RuntimeHandler: "runc",
		})
	}
	var containers []*runtimeapi.Container
	add := func(n int, state runtimeapi.ContainerState) {
		for j := 0; j < n; j++ {
			i := len(containers)
			sb := sandboxes[i%len(sandboxes)]
			c := &runtimeapi.Container{
				Id:           hexID("ct", i),
				PodSandboxId: sb.Id,
				Metadata:     &runtimeapi.ContainerMetadata{Name: "worker", Attempt: uint32(i / len(sandboxes))},
				Image:        &runtimeapi.ImageSpec{Image: "registry.example/batch/worker:v1.42.7"},
				ImageRef:     "sha256:" + strings.Repeat("ab", 32),
				State:        state,
				CreatedAt:    1764000000000000000 + int64(i)*1e9,
				Labels: map[string]string{
					"io.kubernetes.pod.name":       sb.Metadata.Name,
					"io.kubernetes.pod.namespace":  sb.Metadata.Namespace,
					"io.kubernetes.pod.uid":        sb.Metadata.Uid,
					"io.kubernetes.container.name": "worker",
				},
				Annotations: map[string]string{
					"io.kubernetes.container.hash":                     fmt.Sprintf("%08x", 0x5f1e0000+i),
					"io.kubernetes.container.restartCount":             fmt.Sprint(i / len(sandboxes)),
					"io.kubernetes.container.terminationMessagePath":   "/dev/termination-log",
					"io.kubernetes.container.terminationMessagePolicy": "File",
					"io.kubernetes.pod.terminationGracePeriod":         "30",
					"io.kubernetes.container.ports":                    `[{"name":"http","containerPort":8080,"protocol":"TCP"}]`,
				},
				ImageId: "sha256:" + strings.Repeat("cd", 32),
			}
			if spec.PaddingBytes > 0 {
				c.Annotations["pleg-exporter.test/padding"] = strings.Repeat("x", spec.PaddingBytes)
			}
			containers = append(containers, c)
		}
	}
	add(spec.Created, runtimeapi.ContainerState_CONTAINER_CREATED)
	add(spec.Running, runtimeapi.ContainerState_CONTAINER_RUNNING)
	add(spec.Exited, runtimeapi.ContainerState_CONTAINER_EXITED)
	add(spec.Unknown, runtimeapi.ContainerState_CONTAINER_UNKNOWN)
	return sandboxes, containers
}

func hexID(kind string, i int) string {
	tag := 0xc0
	if kind == "sb" {
		tag = 0xa0
	}
	return fmt.Sprintf("%02x%062x", tag, i)
}

func uid(i int) string {
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", i, i%0xffff, i%0xfff, i%0xfff, i)
}

func suffix(i int) string {
	const letters = "bcdfghjklmnpqrstvwxz"
	b := make([]byte, 5)
	for k := range b {
		b[k] = letters[(i+k*7)%len(letters)]
		i /= 3
	}
	return string(b)
}

// BenchSpec is a realistic busy node of n containers: most exited (the
// pile-up), a tenth running, one sandbox per ten containers, each container
// carrying the kubelet's labels and annotations plus padding bytes (1600
// gives ~2.3 KiB per container, a preStop hook and device annotations' worth).
func BenchSpec(n, padding int) Spec {
	return Spec{Ready: n / 20, NotReady: n / 20, Created: n / 100, Running: n / 10, Exited: n - n/100 - n/10 - n/200, Unknown: n / 200, PaddingBytes: padding}
}
