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
	"testing"
	"unicode/utf8"
)

func TestNamespaceLabel(t *testing.T) {
	for ns, want := range map[string]string{
		"":                NoNamespace,
		"batch-jobs":      "batch-jobs",
		"(none)":          `"(none)"`,
		"other":           `"other"`,
		"bad\xff":         `"bad\xff"`,
		`"other"`:         `"\"other\""`,
		"caf\u00e9":       "caf\u00e9", // UTF-8, not a namespace name: as sent
		"bad\xff\xfe":     `"bad\xff\xfe"`,
		"\"bad\xff\xfe\"": `"\"bad\xff\xfe\""`,
	} {
		if got := NamespaceLabel(ns); got != want {
			t.Errorf("NamespaceLabel(%q) = %q, want %q", ns, got, want)
		}
	}
}

// No two tally keys share a label value, none is a placeholder, all are
// UTF-8: the placeholders cannot come from the wire.
func FuzzNamespaceLabel(f *testing.F) {
	for _, s := range []string{"", "a", "(none)", "other", "bad\xff", `"a"`, `"(none)"`} {
		f.Add(s, "other")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		la, lb := NamespaceLabel(a), NamespaceLabel(b)
		if !utf8.ValidString(la) {
			t.Errorf("label %q of %q is not UTF-8", la, a)
		}
		if a != b && la == lb {
			t.Errorf("%q and %q share the label %q", a, b, la)
		}
		if a != "" && (la == NoNamespace || la == OtherNamespace) {
			t.Errorf("%q is labelled like a placeholder: %q", a, la)
		}
	})
}

func TestTopKeepsWireValuesApartFromPlaceholders(t *testing.T) {
	tally := NamespaceTally{}
	add := func(ns string, n int) {
		for range n {
			tally.Add(ns, ContainerExited, 10)
		}
	}
	add("other", 6)
	add("(none)", 5)
	add("bad\xff", 4)
	add("bad\xfe", 3)
	add("", 2)
	add("a", 1)
	add("b", 1)
	got := map[string]int{}
	for _, s := range tally.Top(5) {
		if _, dup := got[s.Namespace]; dup {
			t.Errorf("%q twice", s.Namespace)
		}
		got[s.Namespace] = s.total()
	}
	want := map[string]int{`"other"`: 6, `"(none)"`: 5, `"bad\xff"`: 4, `"bad\xfe"`: 3, NoNamespace: 2, OtherNamespace: 2}
	if len(got) != len(want) {
		t.Errorf("top = %v, want %v", got, want)
	}
	for ns, n := range want {
		if got[ns] != n {
			t.Errorf("top[%q] = %d, want %d (all: %v)", ns, got[ns], n, got)
		}
	}
	// Top leaves the tally as it was.
	if _, ok := tally[""]; !ok || tally[""].Namespace != "" {
		t.Errorf("tally changed: %+v", tally[""])
	}
}
