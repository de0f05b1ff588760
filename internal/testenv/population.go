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
	"strings"
)

// SmallPopulation adds what a small node has: two running pods with
// finished job containers and a container that never started, and a
// finished (notready) pod.
func SmallPopulation(ctx context.Context, k *PodClient) error {
	for i, ns := range []string{"default", "batch-jobs"} {
		pod, err := k.RunPod(ctx, ns, fmt.Sprintf("demo%d-0", i))
		if err != nil {
			return err
		}
		if _, err := k.CreateContainer(ctx, pod, ContainerSpec{Name: "app", Start: true}); err != nil {
			return err
		}
		for a := uint32(0); a < 3; a++ {
			if _, err := k.CreateContainer(ctx, pod, ContainerSpec{Name: "job", Attempt: a, Command: []string{"/bin/true"}, Start: true}); err != nil {
				return err
			}
		}
		if _, err := k.CreateContainer(ctx, pod, ContainerSpec{Name: "init"}); err != nil {
			return err
		}
	}
	done, err := k.RunPod(ctx, "batch-jobs", "cron-29218680-tzdzg")
	if err != nil {
		return err
	}
	return k.StopPod(ctx, done)
}

// floodPerPod caps Flood's containers in one pod (6.4 MiB of annotations):
// a kubelet slow to stop a pod it does not know (seen: 260 containers in one
// pod, 17 MB, right after a freeze) must not leave one sandbox whose
// containers alone pass the limit, which no CRI filter can split.
const floodPerPod = 100

// FloodNamespace is the namespace of Flood's pods.
const FloodNamespace = "leaky-ns"

// Flood adds never-started containers with 64 KiB annotations, as a
// CronJob that leaves containers behind does over weeks, until the
// unfiltered ListContainers answer is 1 MiB past limit bytes (the
// annotations alone are). They go into pods of namespace leaky-ns; a
// kubelet stops such a pod within a second or two (it does not know it),
// after which containerd creates no container in it, so a new pod follows;
// five pods in a row that take none is an error. It returns the containers
// and pods it created, also on an error.
func Flood(ctx context.Context, k *PodClient, limit int) (ids []string, pods []*Pod, err error) {
	pad := strings.Repeat("p", 64<<10)
	var pod *Pod
	failures, inPod := 0, 0
	for len(ids)*len(pad) <= limit+1<<20 {
		if inPod == floodPerPod {
			pod, inPod = nil, 0
		}
		if pod == nil {
			if pod, err = k.RunPod(ctx, FloodNamespace, fmt.Sprintf("leaky-cron-%d", len(pods))); err != nil {
				return ids, pods, err
			}
			pods = append(pods, pod)
		}
		id, err := k.CreateContainer(ctx, pod, ContainerSpec{
			Name: "leak", Attempt: uint32(len(ids)), ExtraAnnotations: map[string]string{"example.com/payload": pad},
		})
		if err != nil {
			if failures++; failures > 5 || ctx.Err() != nil {
				return ids, pods, fmt.Errorf("flood: %d pods in a row took no container: %w", failures, err)
			}
			pod = nil
			continue
		}
		failures = 0
		inPod++
		ids = append(ids, id)
	}
	return ids, pods, nil
}
