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
	"regexp"
	"strings"
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

// ShellWord is s as one word for a POSIX shell: as it is when it is plainly
// one word (letters, digits and /:._-+=@, as an endpoint URL is), else
// quoted by shellQuote. The gc command lines that diagnose and gc print
// use it for the flags' values.
func ShellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/:._-+=@") == "" {
		return s
	}
	return shellQuote(s)
}

// shellQuoteAll quotes each of ss, space-separated.
func shellQuoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = shellQuote(s)
	}
	return strings.Join(q, " ")
}
