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

package gc

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// A node whose ListContainers answer is answer bytes: groups (pods) of
// attempts, finished (no ready sandbox) or not.
func sized(pods, attempts int, finished bool, answer int64) *kubecontainer.Inventory {
	n := &node{}
	for p := 0; p < pods; p++ {
		state := ready
		if finished {
			state = notready
		}
		sb := fmt.Sprintf("s%d", p)
		n.sandbox(sb, "batch", fmt.Sprintf("pod-%d", p), fmt.Sprintf("uid-%d", p), state, 0)
		for a := 0; a < attempts; a++ {
			name := "job"
			if finished {
				name = fmt.Sprintf("step-%d", a) // one attempt each: the kubelet's policy keeps them
			}
			c := n.container(fmt.Sprintf("c%d-%d", p, a), sb, name, exited, uint32(a), a+1)
			c.Bytes = answer / int64(pods*attempts)
		}
	}
	n.inv.Payload = map[string]int64{kubecontainer.RPCListContainers: answer}
	return &n.inv
}

func TestRecommendation(t *testing.T) {
	const limit = 1000000
	pol := Policy{KeepPerContainer: 1, LimitBytes: limit}
	cmd := "pleg_exporter gc --runtime.endpoint=unix:///x.sock"
	for _, tc := range []struct {
		name     string
		inv      *kubecontainer.Inventory
		pol      Policy
		want     string // recommended policy, "" for none
		command  string
		whyParts []string
	}{
		{"the kubelet's policy is enough", sized(10, 10, false, 2*limit), pol, PolicyKubelet, cmd + " --apply", []string{"20.0% of the limit"}},
		{"only finished pods help", sized(10, 10, true, 2*limit), pol, PolicyFinishedPods, cmd + " --apply --finished-pods", []string{"200.0%", "0.0%"}},
		{"nothing at all", sized(0, 0, false, 0), pol, "", "", []string{"find nothing"}},
		{"under the warning, only finished pods would remove", sized(10, 10, true, limit/10), pol, "", "", []string{"finds nothing", "would remove 110 more"}},
		{"flags carried over", sized(10, 10, false, 2*limit), Policy{KeepPerContainer: 3, MinAge: time.Minute, UntilRatio: 0.5, LimitBytes: limit},
			PolicyKubelet, cmd + " --apply --keep-per-container=3 --min-age=1m0s --until-ratio=0.5", nil},
		{"already under the ratio", sized(10, 10, false, limit/10), Policy{KeepPerContainer: 1, UntilRatio: 0.5, LimitBytes: limit}, "", "", []string{"already under --until-ratio"}},
	} {
		r := NewReport(tc.inv, tc.pol, 0.75, cmd, at(600))
		if r.Recommended != tc.want || r.Command != tc.command {
			t.Errorf("%s: recommended %q, command %q; want %q, %q (why: %s)", tc.name, r.Recommended, r.Command, tc.want, tc.command, r.Why)
		}
		for _, w := range tc.whyParts {
			if !strings.Contains(r.Why, w) {
				t.Errorf("%s: why %q lacks %q", tc.name, r.Why, w)
			}
		}
	}
}

func TestTextReport(t *testing.T) {
	inv := sized(3, 4, false, 20<<20)
	inv.Info = kubecontainer.Info{Runtime: "containerd", Version: "1.6.20", Endpoint: "unix:///run/containerd/containerd.sock"}
	inv.Containers[0].Namespace = "evil\x1b]0;pwned\x07"
	r := NewReport(inv, Policy{KeepPerContainer: 1, LimitBytes: 16 << 20}, 0.75, "pleg_exporter gc", at(600))
	var b strings.Builder
	r.Text(&b)
	out := b.String()
	for _, want := range []string{
		"DRY RUN", "ListContainers 20.0 MiB (125.0% of the limit, TOO LARGE",
		"the kubelet's policy (keep 1)", "total", "Recommended: pleg_exporter gc --apply",
		`evil\x1b]0;pwned\x07`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	if strings.ContainsRune(out, '\x1b') {
		t.Errorf("an escape reached the text:\n%q", out)
	}
}

// A label is cut by characters, never inside one: fmt pads the column by
// runes, and half a character is not UTF-8.
func TestClipKeepsUTF8(t *testing.T) {
	s := strings.Repeat("ñ", 40)
	got := clip(s, 34)
	if !utf8.ValidString(got) || utf8.RuneCountInString(got) != 34 || !strings.HasSuffix(got, "…") {
		t.Errorf("clip(40 × ñ, 34) = %q (%d runes, valid %t), want 33 ñ and an ellipsis", got, utf8.RuneCountInString(got), utf8.ValidString(got))
	}
	if got := clip("payments/api", 34); got != "payments/api" {
		t.Errorf("clip of a short label = %q", got)
	}
}
