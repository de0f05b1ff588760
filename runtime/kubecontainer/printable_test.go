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

import "testing"

func TestPrintable(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"batch-jobs", "batch-jobs"},
		{"naïve-日本", "naïve-日本"},
		{"\x1b[2J\x1b]0;owned\x07", `\x1b[2J\x1b]0;owned\x07`},
		{"a\nb\tc\r", `a\x0ab\x09c\x0d`},
		{"bad\xff\xfe", `bad\xff\xfe`},
		{"\u009b31m", `\u009b31m`},
		{"a\u202eb\u2066", `a\u202eb\u2066`},
		{"del\x7f", `del\x7f`},
		{"line\u2028sep", `line\u2028sep`},
		{"real \ufffd stays", "real \ufffd stays"},
		{"\x00", `\x00`},
	} {
		if got := Printable(tc.in); got != tc.want {
			t.Errorf("Printable(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// shellQuote hands sh back exactly the value, whatever it holds (but NUL,
// which no argument can).
