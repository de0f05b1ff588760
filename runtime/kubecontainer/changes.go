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

package kubecontainer

import (
	"cmp"
	"hash/maphash"
	"slices"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Churn, as the kubelet's relist meets it. Every relist the PLEG compares
// each container's and sandbox's state with the previous relist's, and for
// every pod with a change (a container or sandbox that appeared, changed
// state or went) it calls GetPodStatus: a PodSandboxStatus and a
// ContainerStatus per container of that pod, inside the relist. Under high
// churn those calls, not the two lists, are what make a relist slow.
//
// Changes compares two consecutive complete relists the same way and keeps
// only what that needs: one hash of each id with its state and pod, and the
// uid of each listed pod (a string per pod, made once while the pod lives),
// which the status pass needs to inspect it. It never holds a container or
// sandbox id.

// Changes tracks the items of the relist being read against the previous
// complete one. Not safe for concurrent use: one relist at a time.
//
// While the lists are read (inside the relist's measured time) a container
// costs two hashes and an append; the comparison waits for End: both
// relists' items sorted by id hash and walked side by side, no map per item.
type Changes struct {
	// prev is the previous complete relist's items, sorted by id, one per
	// id; next is this relist's, in listing order until End.
	prev, next []item
	sandboxPod map[uint64]uint64 // this relist's sandbox id hash → pod uid hash
	pods       map[uint64]struct{}
	// uids and prevUIDs map a pod uid hash to the uid, for the pods of this
	// relist and of the previous complete one.
	uids, prevUIDs map[uint64]string
	changedUIDs    []string
	havePrevious   bool
}

// item is one listed container or sandbox.
type item struct {
	id  uint64 // id hash
	pod uint64 // pod uid hash; a container's sandbox id hash until End resolves it
	// seq is the listing order, twice, plus 1 for a sandbox: an item
	// listed twice in one relist (a fallback's filtered lists) counts as
	// its later listing.
	seq   uint32
	state int32
}

func (it item) sandbox() bool { return it.seq&1 == 1 }

// NewChanges returns a tracker with no previous relist: the first complete
// relist is compared with nothing and reports no changes.
func NewChanges() *Changes {
	return &Changes{
		sandboxPod: map[uint64]uint64{}, pods: map[uint64]struct{}{},
		uids: map[uint64]string{}, prevUIDs: map[uint64]string{},
	}
}

var hashSeed = maphash.MakeSeed()

// Hash is what the tracker keeps of an id: a 64-bit hash (the runtime's
// AES-based one, seeded once per process), so equal within one process.
func Hash(b []byte) uint64 { return maphash.Bytes(hashSeed, b) }

// Begin starts reading a relist.
func (c *Changes) Begin() {
	c.next = c.next[:0]
	clear(c.sandboxPod)
	clear(c.uids)
	c.changedUIDs = nil
}

func (c *Changes) add(id, pod uint64, state int32, sandbox bool) {
	seq := uint32(len(c.next)) << 1
	if sandbox {
		seq |= 1
	}
	c.next = append(c.next, item{id: id, pod: pod, seq: seq, state: state})
}

// Sandbox records a listed sandbox of the pod podUID. Sandboxes are read
// before containers, as the relist lists them.
func (c *Changes) Sandbox(id, podUID []byte, state int32) {
	h, pod := Hash(id), Hash(podUID)
	if len(podUID) == 0 {
		pod = h
	}
	c.sandboxPod[h] = pod
	c.add(h, pod, state, true)
	if len(podUID) > 0 {
		if _, ok := c.uids[pod]; !ok {
			uid, known := c.prevUIDs[pod]
			if !known {
				uid = string(podUID)
			}
			c.uids[pod] = uid
		}
	}
}

// Container records a listed container of the sandbox sandboxID. Its pod is
// that sandbox's, resolved at End (the sandboxes may be listed after the
// containers when their list needed the fallback); a container whose
// sandbox was not listed counts as a pod of its own sandbox id. Created and
// unknown are one state, as in the kubelet's PLEG (its convertState): a
// container going from one to the other is no change.
func (c *Changes) Container(id, sandboxID []byte, state int32) {
	if state == int32(runtimeapi.ContainerState_CONTAINER_CREATED) {
		state = int32(runtimeapi.ContainerState_CONTAINER_UNKNOWN)
	}
	c.add(Hash(id), Hash(sandboxID), state, false)
}

// ResetSandboxes and ResetContainers forget what a listing that broke half
// way recorded, before the items are listed again another way.
func (c *Changes) ResetSandboxes() {
	c.next = slices.DeleteFunc(c.next, item.sandbox)
	clear(c.sandboxPod)
	clear(c.uids)
}

// ResetContainers forgets the containers recorded so far in this relist.
func (c *Changes) ResetContainers() {
	c.next = slices.DeleteFunc(c.next, func(it item) bool { return !it.sandbox() })
}

// End finishes the relist. A complete one is compared with the previous
// complete one: items (containers and sandboxes) that appeared, went or
// changed state, and the pods they belong to; ok is false when there was
// nothing to compare. An incomplete relist changes nothing: the next
// complete one is compared with the last complete one.
func (c *Changes) End(complete bool) (items, pods int, ok bool) {
	c.changedUIDs = nil
	if !complete {
		return 0, 0, false
	}
	next := c.next
	for i, it := range next {
		if pod, ok := c.sandboxPod[it.pod]; ok && !it.sandbox() {
			next[i].pod = pod
		}
	}
	slices.SortFunc(next, func(a, b item) int {
		if a.id != b.id {
			return cmp.Compare(a.id, b.id)
		}
		return cmp.Compare(a.seq, b.seq)
	})
	// One item per id, the later listing.
	w := 0
	for r := range next {
		if r+1 < len(next) && next[r+1].id == next[r].id {
			continue
		}
		next[w] = next[r]
		w++
	}
	next = next[:w]
	if c.havePrevious {
		clear(c.pods)
		prev := c.prev
		i, j := 0, 0
		for i < len(next) || j < len(prev) {
			switch {
			case j == len(prev) || (i < len(next) && next[i].id < prev[j].id): // appeared
				items++
				c.pods[next[i].pod] = struct{}{}
				i++
			case i == len(next) || prev[j].id < next[i].id: // went
				items++
				c.pods[prev[j].pod] = struct{}{}
				j++
			default:
				if next[i].state != prev[j].state {
					items++
					c.pods[next[i].pod] = struct{}{}
				}
				i++
				j++
			}
		}
		pods, ok = len(c.pods), true
		for pod := range c.pods {
			// A pod that went whole is not inspected: the kubelet's
			// updateCache only drops it from its cache.
			if uid, listed := c.uids[pod]; listed {
				c.changedUIDs = append(c.changedUIDs, uid)
			}
		}
	} else {
		for _, uid := range c.uids {
			c.changedUIDs = append(c.changedUIDs, uid)
		}
	}
	slices.Sort(c.changedUIDs)
	c.prev, c.next = next, c.prev
	c.prevUIDs, c.uids = c.uids, c.prevUIDs
	c.havePrevious = true
	return items, pods, ok
}

// PodUIDs returns, after End, the uids of the pods the kubelet's status
// pass would inspect: the listed pods with a change, sorted; after the first
// complete relist, every listed pod (all are new). nil after an incomplete
// relist. Containers whose sandbox was not listed have no known uid and are
// not named.
func (c *Changes) PodUIDs() []string { return c.changedUIDs }
