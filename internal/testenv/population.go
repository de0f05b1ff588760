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

// Flood adds created containers with 64 KiB annotations to two pods in
// namespace leaky-ns until the unfiltered ListContainers answer passes
// limit bytes, as a CronJob that leaves containers behind does over weeks.
// It returns the ids it created.
func Flood(ctx context.Context, k *PodClient, limit int) ([]string, error) {
	var pods []*Pod
	for i := 0; i < 2; i++ {
		p, err := k.RunPod(ctx, "leaky-ns", fmt.Sprintf("leaky-cron-%d", i))
		if err != nil {
			return nil, err
		}
		pods = append(pods, p)
	}
	pad := make([]byte, 64<<10)
	for i := range pad {
		pad[i] = 'p'
	}
	var ids []string
	for {
		for i := 0; i < 16; i++ {
			id, err := k.CreateContainer(ctx, pods[len(ids)%2], ContainerSpec{
				Name: "leak", Attempt: uint32(len(ids)), ExtraAnnotations: map[string]string{"example.com/payload": string(pad)},
			})
			if err != nil {
				return ids, err
			}
			ids = append(ids, id)
		}
		if len(ids)*(64<<10) > limit+(1<<20) {
			return ids, nil
		}
	}
}
