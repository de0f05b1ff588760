package diagnose

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Every namespace, pod name and ID in an inventory is whatever the creator
// of the container wrote: the kubelet validates the names it writes, but
// anyone who can create a container on the node can label it as they like,
// and the report's commands are pasted into a root shell. So a runtime
// value goes into a printed command only when it is what the kubelet itself
// could have written (a DNS-1123 label for a namespace, a DNS-1123 subdomain
// for a pod name, lowercase hex for an ID), and then single-quoted anyway
// (alone, or after the key of a label filter: key='value'), so a check that
// ever let something through would still pass one literal word.
// A step whose value fails the check prints no command; its text says the
// value is not a valid Kubernetes name and what was left out.

// The kubelet's own rules (k8s.io/apimachinery/pkg/util/validation:
// IsDNS1123Label, IsDNS1123Subdomain), repeated to keep the dependency out.
var (
	dns1123Label     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dns1123Subdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// validNamespace reports whether s can be a Kubernetes namespace.
func validNamespace(s string) bool { return len(s) <= 63 && dns1123Label.MatchString(s) }

// validPodName reports whether s can be a Kubernetes pod name.
func validPodName(s string) bool { return len(s) <= 253 && dns1123Subdomain.MatchString(s) }

// validID reports whether s looks like a container or sandbox ID as
// containerd and Docker write them: lowercase hex.
func validID(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// shellQuote makes s one literal word for a POSIX shell: inside single
// quotes nothing is special but the quote itself, which is written as
//
//	'\''
//
// (close the quotes, an escaped quote, open them again).
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellQuoteAll quotes each of ss, space-separated.
func shellQuoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = shellQuote(s)
	}
	return strings.Join(q, " ")
}

// Printable is what the text report prints of a line: a runtime value can
// carry terminal escapes (retitle the window, clear the screen, hide or
// rewrite what the engineer reads above a command), so invalid UTF-8 and C0
// controls and DEL are written as \xNN, C1 controls, bidirectional overrides
// and line separators as \uNNNN; everything else is printed as is.
func Printable(s string) string {
	clean := utf8.ValidString(s)
	for _, r := range s {
		if unprintable(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < utf8.RuneSelf && unprintable(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unprintable(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// unprintable: what a terminal interprets rather than shows.
func unprintable(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029'
}
