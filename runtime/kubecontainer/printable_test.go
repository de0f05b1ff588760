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
