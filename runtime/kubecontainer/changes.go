package kubecontainer

import (
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
type Changes struct {
	prev, next map[uint64]itemState // item id hash → state and pod
	sandboxPod map[uint64]uint64    // this relist's sandbox id hash → pod uid hash
	pods       map[uint64]struct{}
	// uids and prevUIDs map a pod uid hash to the uid, for the pods of this
	// relist and of the previous complete one.
	uids, prevUIDs map[uint64]string
	changedUIDs    []string
	havePrevious   bool
}

type itemState struct {
	pod     uint64 // a container's sandbox id hash until End resolves it
	state   int32
	sandbox bool
}

// NewChanges returns a tracker with no previous relist: the first complete
// relist is compared with nothing and reports no changes.
func NewChanges() *Changes {
	return &Changes{
		prev: map[uint64]itemState{}, next: map[uint64]itemState{},
		sandboxPod: map[uint64]uint64{}, pods: map[uint64]struct{}{},
		uids: map[uint64]string{}, prevUIDs: map[uint64]string{},
	}
}

// Hash is FNV-1a of b: what the tracker keeps of an id.
func Hash(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// Begin starts reading a relist.
func (c *Changes) Begin() {
	clear(c.next)
	clear(c.sandboxPod)
	clear(c.uids)
	c.changedUIDs = nil
}

// Sandbox records a listed sandbox of the pod podUID. Sandboxes are read
// before containers, as the relist lists them.
func (c *Changes) Sandbox(id, podUID []byte, state int32) {
	h, pod := Hash(id), Hash(podUID)
	if len(podUID) == 0 {
		pod = h
	}
	c.sandboxPod[h] = pod
	c.next[h] = itemState{pod: pod, state: state, sandbox: true}
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
	c.next[Hash(id)] = itemState{pod: Hash(sandboxID), state: state}
}

// ResetSandboxes and ResetContainers forget what a listing that broke half
// way recorded, before the items are listed again another way.
func (c *Changes) ResetSandboxes() {
	for h, st := range c.next {
		if st.sandbox {
			delete(c.next, h)
		}
	}
	clear(c.sandboxPod)
	clear(c.uids)
}

// ResetContainers forgets the containers recorded so far in this relist.
func (c *Changes) ResetContainers() {
	for h, st := range c.next {
		if !st.sandbox {
			delete(c.next, h)
		}
	}
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
	for h, st := range c.next {
		if pod, ok := c.sandboxPod[st.pod]; ok && !st.sandbox {
			st.pod = pod
			c.next[h] = st
		}
	}
	if c.havePrevious {
		clear(c.pods)
		for h, n := range c.next {
			if p, seen := c.prev[h]; !seen || p.state != n.state {
				items++
				c.pods[n.pod] = struct{}{}
			}
		}
		for h, p := range c.prev {
			if _, still := c.next[h]; !still {
				items++
				c.pods[p.pod] = struct{}{}
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
	c.prev, c.next = c.next, c.prev
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
