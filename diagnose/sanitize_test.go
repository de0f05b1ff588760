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

package diagnose

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

func TestShellQuote(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	for _, v := range append([]string{"'", "''", `\'`, "a'b'c", "'$(id)'"}, hostile...) {
		out, err := exec.Command(sh, "-c", "printf %s "+shellQuote(v)).Output()
		if err != nil || string(out) != v {
			t.Errorf("sh reads %s as %q (%v), want %q", shellQuote(v), out, err, v)
		}
		if words, err := shellWords("x " + shellQuote(v)); err != nil || len(words) != 2 || words[1].text != v || !words[1].quoted {
			t.Errorf("shellWords(%s) = %+v, %v", shellQuote(v), words, err)
		}
	}
}

func TestValidNames(t *testing.T) {
	for _, tc := range []struct {
		s           string
		ns, pod, id bool
	}{
		{s: "default", ns: true, pod: true},
		{s: "kube-system", ns: true, pod: true},
		{s: "web-7f9c.example", pod: true},
		{s: "0123abcdef", ns: true, pod: true, id: true},
		{s: strings.Repeat("z", 63), ns: true, pod: true},
		{s: strings.Repeat("z", 64), pod: true},
		{s: strings.Repeat("z", 254)},
		{s: ""},
		{s: "-n"},
		{s: "a-"},
		{s: "Upper"},
		{s: "a_b"},
		{s: "ABCDEF"},
		{s: "a b"},
		{s: "a;b"},
		{s: "a\nb"},
		{s: kubecontainer.NoNamespace},
	} {
		if got := validNamespace(tc.s); got != tc.ns {
			t.Errorf("validNamespace(%q) = %v", tc.s, got)
		}
		if got := validPodName(tc.s); got != tc.pod {
			t.Errorf("validPodName(%q) = %v", tc.s, got)
		}
		if got := validID(tc.s); got != tc.id {
			t.Errorf("validID(%q) = %v", tc.s, got)
		}
	}
}

// ShellWord leaves a plain endpoint as it is and quotes anything else, so
// that the shell reads it back as the one word it was.
func TestShellWord(t *testing.T) {
	for _, v := range []string{"unix:///run/containerd/containerd.sock", "unix:///tmp/a b.sock", "it's", "$(reboot)", "", "a;b"} {
		w := ShellWord(v)
		if v == "unix:///run/containerd/containerd.sock" && w != v {
			t.Errorf("ShellWord(%q) = %q, want it unquoted", v, w)
		}
		words, err := shellWords("x " + w)
		if err != nil || len(words) != 2 || words[1].text != v {
			t.Errorf("ShellWord(%q) = %s, read back as %+v, %v", v, w, words, err)
		}
	}
}
