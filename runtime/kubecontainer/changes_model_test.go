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
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// model is the churn comparison written the plain way: a map of each
// relist's items, the later listing of an id winning, compared with the
// last complete relist's.
type model struct {
	prev, next       map[string][2]string // id → pod key, state
	sandboxPod       map[string]string    // sandbox id → uid
	prevUIDs, uids   map[string]bool
	havePrev         bool
	sandboxes, items map[string]bool
}

func newModel() *model {
	return &model{prev: map[string][2]string{}, prevUIDs: map[string]bool{}}
}

func (m *model) begin() {
	m.next, m.sandboxPod, m.uids, m.sandboxes = map[string][2]string{}, map[string]string{}, map[string]bool{}, map[string]bool{}
}

func (m *model) sandbox(id, uid string, state int32) {
	pod := "uid:" + uid
	if uid == "" {
		pod = "sb:" + id
	}
	m.sandboxPod[id] = pod
	m.next[id] = [2]string{pod, fmt.Sprint(state)}
	m.sandboxes[id] = true
	if uid != "" {
		m.uids[uid] = true
	}
}

func (m *model) container(id, sandbox string, state int32) {
	if state == 0 {
		state = 3
	}
	m.next[id] = [2]string{"sb:" + sandbox, fmt.Sprint(state)}
	delete(m.sandboxes, id)
}

func (m *model) end(complete bool) (items, pods int, ok bool, uids []string) {
	if !complete {
		return 0, 0, false, nil
	}
	for id, v := range m.next {
		if pod, found := m.sandboxPod[v[0][3:]]; found && !m.sandboxes[id] && v[0][:3] == "sb:" {
			m.next[id] = [2]string{pod, v[1]}
		}
	}
	changed := map[string]bool{}
	if m.havePrev {
		for id, n := range m.next {
			if p, seen := m.prev[id]; !seen || p[1] != n[1] {
				items++
				changed[n[0]] = true
			}
		}
		for id, p := range m.prev {
			if _, still := m.next[id]; !still {
				items++
				changed[p[0]] = true
			}
		}
		pods, ok = len(changed), true
		for pod := range changed {
			if len(pod) > 4 && pod[:4] == "uid:" && m.uids[pod[4:]] {
				uids = append(uids, pod[4:])
			}
		}
	} else {
		for uid := range m.uids {
			uids = append(uids, uid)
		}
	}
	slices.Sort(uids)
	m.prev, m.havePrev = m.next, true
	return items, pods, ok, uids
}

// Random relists, resets, duplicate listings and incomplete relists: the
// tracker agrees with the model on every count and every uid.
func TestChangesAgreeWithModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	c, m := NewChanges(), newModel()
	for round := 0; round < 400; round++ {
		c.Begin()
		m.begin()
		nsb := 1 + r.IntN(8)
		list := func() {
			for s := 0; s < nsb; s++ {
				id, uid := fmt.Sprintf("sb%d", s+r.IntN(3)), fmt.Sprintf("uid-%d", s%5)
				if r.IntN(10) == 0 {
					uid = ""
				}
				st := int32(r.IntN(2))
				c.Sandbox([]byte(id), []byte(uid), st)
				m.sandbox(id, uid, st)
			}
		}
		list()
		if r.IntN(10) == 0 { // a stream broke half way
			c.ResetSandboxes()
			m.next, m.sandboxPod, m.uids, m.sandboxes = map[string][2]string{}, map[string]string{}, map[string]bool{}, map[string]bool{}
			list()
		}
		for k := 0; k < 30; k++ {
			id, sb := fmt.Sprintf("c%d", r.IntN(40)), fmt.Sprintf("sb%d", r.IntN(10))
			st := int32(r.IntN(4))
			c.Container([]byte(id), []byte(sb), st)
			m.container(id, sb, st)
		}
		complete := r.IntN(8) != 0
		gi, gp, gok := c.End(complete)
		wi, wp, wok, wuids := m.end(complete)
		if gi != wi || gp != wp || gok != wok || !slices.Equal(c.PodUIDs(), wuids) {
			t.Fatalf("round %d: tracker %d items %d pods %v %v, model %d items %d pods %v %v",
				round, gi, gp, gok, c.PodUIDs(), wi, wp, wok, wuids)
		}
	}
}
