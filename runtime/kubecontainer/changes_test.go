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
	"slices"
	"testing"
)

func TestChanges(t *testing.T) {
	c := NewChanges()
	relist := func(complete bool, sandboxes [][3]string, containers [][3]string) (int, int, bool) {
		c.Begin()
		for _, s := range sandboxes { // id, pod uid, state
			c.Sandbox([]byte(s[0]), []byte(s[1]), int32(s[2][0]-'0'))
		}
		for _, ct := range containers { // id, sandbox id, state
			c.Container([]byte(ct[0]), []byte(ct[1]), int32(ct[2][0]-'0'))
		}
		return c.End(complete)
	}
	sbs := [][3]string{{"sb1", "uid-a", "0"}, {"sb2", "uid-b", "0"}, {"sb3", "uid-c", "1"}}
	cts := [][3]string{{"c1", "sb1", "1"}, {"c2", "sb1", "2"}, {"c3", "sb2", "1"}, {"c4", "sb3", "2"}}
	if _, _, ok := relist(true, sbs, cts); ok {
		t.Fatal("the first relist has nothing to compare with")
	}
	if items, pods, ok := relist(true, sbs, cts); !ok || items != 0 || pods != 0 {
		t.Fatalf("nothing changed: items %d pods %d ok %v", items, pods, ok)
	}
	// c1 exits, c3 goes, c5 appears in pod a; pod b's sandbox turns notready.
	sbs2 := [][3]string{{"sb1", "uid-a", "0"}, {"sb2", "uid-b", "1"}, {"sb3", "uid-c", "1"}}
	cts2 := [][3]string{{"c1", "sb1", "2"}, {"c2", "sb1", "2"}, {"c4", "sb3", "2"}, {"c5", "sb1", "0"}}
	if items, pods, ok := relist(true, sbs2, cts2); !ok || items != 4 || pods != 2 {
		t.Errorf("items %d pods %d ok %v, want 4 items (c1, c3, c5, sb2) in 2 pods", items, pods, ok)
	}
	// An incomplete relist is not compared and does not become the base.
	if _, _, ok := relist(false, sbs, nil); ok {
		t.Error("an incomplete relist was compared")
	}
	// The next complete one compares with the last complete one: pod c's
	// sandbox and container went, and a container of an unlisted sandbox
	// counts as a pod of its own.
	cts3 := [][3]string{{"c1", "sb1", "2"}, {"c2", "sb1", "2"}, {"c5", "sb1", "0"}, {"c9", "sb9", "2"}}
	if items, pods, ok := relist(true, sbs2[:2], cts3); !ok || items != 3 || pods != 2 {
		t.Errorf("items %d pods %d ok %v, want 3 items (sb3, c4, c9) in 2 pods", items, pods, ok)
	}
	// A listing that broke half way forgets what it recorded.
	c.Begin()
	c.Sandbox([]byte("sb1"), []byte("uid-a"), 1)
	c.Container([]byte("c1"), []byte("sb1"), 3)
	c.ResetSandboxes()
	c.ResetContainers()
	for _, s := range sbs2[:2] {
		c.Sandbox([]byte(s[0]), []byte(s[1]), int32(s[2][0]-'0'))
	}
	for _, ct := range cts3 {
		c.Container([]byte(ct[0]), []byte(ct[1]), int32(ct[2][0]-'0'))
	}
	if items, pods, ok := c.End(true); !ok || items != 0 || pods != 0 {
		t.Errorf("after resets: items %d pods %d ok %v, want no change", items, pods, ok)
	}
}

// The containers may be listed before the sandboxes (the sandbox list
// needed the fallback): a changed container still counts in its pod, once
// with its sandbox. A container going from created to unknown is no change
// to the kubelet's PLEG, which folds the two.
func TestChangesOrderAndCreatedUnknown(t *testing.T) {
	const created, running, unknown = 0, 1, 3
	c := NewChanges()
	relist := func(sandboxFirst bool, sbState, c1, c2 int32) (int, int, bool) {
		c.Begin()
		sb := func() { c.Sandbox([]byte("sb1"), []byte("uid-a"), sbState) }
		if sandboxFirst {
			sb()
		}
		c.Container([]byte("c1"), []byte("sb1"), c1)
		c.Container([]byte("c2"), []byte("sb1"), c2)
		if !sandboxFirst {
			sb()
		}
		return c.End(true)
	}
	relist(true, 0, running, created)
	if items, pods, ok := relist(false, 1, 2, unknown); !ok || items != 2 || pods != 1 {
		t.Errorf("sandbox listed last, it and c1 changed, c2 created → unknown: items %d pods %d ok %v, want 2 items in 1 pod", items, pods, ok)
	}
	if items, pods, ok := relist(true, 1, 2, created); !ok || items != 0 || pods != 0 {
		t.Errorf("c2 unknown → created: items %d pods %d ok %v, want no change", items, pods, ok)
	}
}

// The status pass inspects the pods that changed, by uid: every pod after
// the first relist, then the changed pods still listed, never a pod that
// went whole, and none after an incomplete relist.
func TestChangesPodUIDs(t *testing.T) {
	c := NewChanges()
	relist := func(complete bool, sandboxes [][3]string, containers [][3]string) []string {
		c.Begin()
		for _, s := range sandboxes {
			c.Sandbox([]byte(s[0]), []byte(s[1]), int32(s[2][0]-'0'))
		}
		for _, ct := range containers {
			c.Container([]byte(ct[0]), []byte(ct[1]), int32(ct[2][0]-'0'))
		}
		c.End(complete)
		return c.PodUIDs()
	}
	sbs := [][3]string{{"sb1", "uid-a", "0"}, {"sb2", "uid-b", "0"}, {"sb3", "uid-c", "0"}}
	cts := [][3]string{{"c1", "sb1", "1"}, {"c2", "sb2", "1"}, {"c3", "sb3", "1"}}
	if got := relist(true, sbs, cts); !slices.Equal(got, []string{"uid-a", "uid-b", "uid-c"}) {
		t.Errorf("first relist: %v, want every pod", got)
	}
	if got := relist(true, sbs, cts); len(got) != 0 {
		t.Errorf("nothing changed: %v", got)
	}
	// c2 exits; pod c goes whole; a container of an unlisted sandbox
	// appears (no uid to inspect it by).
	cts2 := [][3]string{{"c1", "sb1", "1"}, {"c2", "sb2", "2"}, {"c9", "sb9", "1"}}
	if got := relist(true, sbs[:2], cts2); !slices.Equal(got, []string{"uid-b"}) {
		t.Errorf("after c2 exited and pod c went: %v, want [uid-b]", got)
	}
	if got := relist(false, sbs, cts); got != nil {
		t.Errorf("incomplete relist: %v, want nil", got)
	}
	// Compared with the last complete one: pod c is back.
	if got := relist(true, sbs, cts2); !slices.Equal(got, []string{"uid-c"}) {
		t.Errorf("pod c back: %v, want [uid-c]", got)
	}
}
