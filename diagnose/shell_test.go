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
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// shellWord is one word of a command as a POSIX shell reads it.
type shellWord struct {
	text   string // the argument the shell passes on: prefix + value
	prefix string // the plain part before the quotes
	value  string // what the single-quoted parts (and \' between them) hold
	quoted bool
	op     bool // one of the operators the report writes: | &&
}

// shellWords splits a command line the way sh does, for the subset the
// report may print: words of characters no shell treats specially,
// optionally ending in single-quoted parts with \' between them (how a
// quote inside is written), and the operators | and &&. Anything else
// (another quote, $, `, ;, a redirection, a glob, a comment, a newline, a
// plain part after a quoted one) is an error: the report must never print
// it.
func shellWords(cmd string) ([]shellWord, error) {
	var words []shellWord
	var prefix, value strings.Builder
	inWord, quoted := false, false
	end := func() {
		if inWord {
			words = append(words, shellWord{text: prefix.String() + value.String(), prefix: prefix.String(), value: value.String(), quoted: quoted})
		}
		prefix.Reset()
		value.Reset()
		inWord, quoted = false, false
	}
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		switch {
		case c == ' ':
			end()
		case c == '|' && !inWord:
			words = append(words, shellWord{text: "|", op: true})
		case c == '&' && !inWord && i+1 < len(cmd) && cmd[i+1] == '&':
			words = append(words, shellWord{text: "&&", op: true})
			i++
		case c == '\'':
			j := strings.IndexByte(cmd[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated single quote")
			}
			value.WriteString(cmd[i+1 : i+1+j])
			inWord, quoted = true, true
			i += 1 + j
		case c == '\\' && i+1 < len(cmd) && cmd[i+1] == '\'' && quoted:
			value.WriteByte('\'')
			i++
		case plainByte(c):
			if quoted {
				return nil, fmt.Errorf("word %q has a plain part after a quoted one", prefix.String()+value.String())
			}
			if !inWord && c == '=' {
				return nil, errors.New("word starts with =")
			}
			prefix.WriteByte(c)
			inWord = true
		default:
			return nil, fmt.Errorf("byte %q at %d is special to the shell or outside the printed subset", c, i)
		}
	}
	end()
	return words, nil
}

// plainByte: characters that mean nothing to sh inside a word.
func plainByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_.,=/:@+%", c) >= 0
}

// printedWords are the only plain words the report writes itself; every
// value the runtime supplied must be a quoted word.
var printedWords = strings.Fields(`kubectl cordon NODE drain --ignore-daemonsets --delete-emptydir-data --timeout=5m uncordon
	-n get jobs,cronjobs,pods
	crictl pods ps rm rmp -a -q -f --state notready exited unknown --label
	xargs -r 100
	docker -aq --filter status=exited status=dead label=io.kubernetes.docker.type=container label=io.kubernetes.docker.type=podsandbox system prune
	pleg_exporter diagnose`)

// Written independently of the report's own checks: what Kubernetes accepts
// as a namespace (DNS-1123 label) and a pod name (DNS-1123 subdomain), and
// what runtimes use as a container or sandbox ID.
var (
	k8sLabel     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	k8sSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	hexID        = regexp.MustCompile(`^[0-9a-f]+$`)
)

// quotedOK says whether a word with a quoted part passes a value the
// report may print: a validated namespace, pod name or ID, alone or after
// the key of a label filter.
func quotedOK(w shellWord) bool {
	switch w.prefix {
	case "":
		return k8sLabel.MatchString(w.value) || hexID.MatchString(w.value)
	case "io.kubernetes.pod.namespace=":
		return k8sLabel.MatchString(w.value)
	case "io.kubernetes.pod.name=":
		return len(w.value) <= 253 && k8sSubdomain.MatchString(w.value)
	}
	return false
}

// checkCommand fails unless cmd is one line sh reads as the report's own
// words, the operators it writes, and validated values, each quoted.
func checkCommand(t testing.TB, cmd string) {
	t.Helper()
	if strings.ContainsAny(cmd, "\n\r") {
		t.Fatalf("command spans lines: %q", cmd)
	}
	words, err := shellWords(cmd)
	if err != nil {
		t.Fatalf("command %q: %v", cmd, err)
	}
	for _, w := range words {
		switch {
		case w.op:
		case w.quoted:
			if !quotedOK(w) {
				t.Fatalf("command %q passes %q, not a valid Kubernetes name or ID (after %q)", cmd, w.value, w.prefix)
			}
		case !slices.Contains(printedWords, w.text):
			t.Fatalf("command %q has the unquoted word %q, which the report does not write itself", cmd, w.text)
		}
	}
}

// The tokeniser agrees with a real sh on what it accepts (the argument
// vector), and rejects what the report must never print.
func TestShellWordsAgreesWithSh(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	for _, tc := range []struct {
		cmd  string
		want []string // nil: rejected
	}{
		{cmd: "crictl ps -a --label 'io.kubernetes.pod.namespace=a b' -q", want: []string{"crictl", "ps", "-a", "--label", "io.kubernetes.pod.namespace=a b", "-q"}},
		{cmd: "crictl ps -a --label io.kubernetes.pod.namespace='a;b' -q", want: []string{"crictl", "ps", "-a", "--label", "io.kubernetes.pod.namespace=a;b", "-q"}},
		{cmd: `x a'b'\''c'`, want: []string{"x", "ab'c"}},
		{cmd: `kubectl -n 'it'\''s' get`, want: []string{"kubectl", "-n", "it's", "get"}},
		{cmd: `x ''\'''`, want: []string{"x", "'"}},
		{cmd: "x '$(touch y)' '`id`' ';#'", want: []string{"x", "$(touch y)", "`id`", ";#"}},
		{cmd: "x 'a\nb'", want: []string{"x", "a\nb"}},
		{cmd: "x $(touch y)"},
		{cmd: "x `id`"},
		{cmd: "x;y"},
		{cmd: `x "y"`},
		{cmd: "x 'a'b"},
		{cmd: "x 'a"},
		{cmd: "x # y"},
		{cmd: "x > y"},
		{cmd: "x *"},
		{cmd: "x\ny"},
		{cmd: `x \y`},
	} {
		words, err := shellWords(tc.cmd)
		if tc.want == nil {
			if err == nil {
				t.Errorf("%q accepted as %+v", tc.cmd, words)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.cmd, err)
			continue
		}
		var got []string
		for _, w := range words {
			got = append(got, w.text)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q → %q, want %q", tc.cmd, got, tc.want)
		}
		// sh itself: set the words as the positional parameters and print them.
		out, err := exec.Command(sh, "-c", `set -- `+tc.cmd+`; printf '%s\0' "$@"`).Output()
		if err != nil {
			t.Errorf("sh on %q: %v", tc.cmd, err)
			continue
		}
		shWords := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
		if !slices.Equal(shWords, got) {
			t.Errorf("sh reads %q as %q, the tokeniser as %q", tc.cmd, shWords, got)
		}
	}
}
