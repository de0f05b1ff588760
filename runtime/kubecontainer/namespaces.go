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
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// OtherNamespace labels the sum of the namespaces outside the top N.
const OtherNamespace = "other"

// NoNamespace stands for a container without the kubelet's namespace label.
const NoNamespace = "(none)"

// NamespaceLabel is the label value a namespace as the runtime sent it is
// exported under. The runtime's bytes are not trusted to be a namespace
// name: a value that is not UTF-8 (Prometheus rejects it), that is one of
// the placeholders NoNamespace and OtherNamespace, or that begins with a
// double quote is exported Go-quoted ("bad\xff", "other"), which no
// placeholder and no unquoted value is. So distinct namespaces keep distinct
// label values, all of them UTF-8. No namespace ("") is NoNamespace.
func NamespaceLabel(ns string) string {
	switch {
	case ns == "":
		return NoNamespace
	case ns == NoNamespace || ns == OtherNamespace || strings.HasPrefix(ns, `"`) || !utf8.ValidString(ns):
		return strconv.Quote(ns)
	}
	return ns
}

// NamespaceStat is one namespace's share of a relist.
type NamespaceStat struct {
	// Namespace is the tally's key; in the result of Top, the label value
	// (NamespaceLabel, or OtherNamespace).
	Namespace  string
	Containers map[string]int // by CRI state
	// PayloadBytes is what the namespace's containers add to the
	// ListContainers answer.
	PayloadBytes int64
}

func (n *NamespaceStat) total() int {
	t := 0
	for _, v := range n.Containers {
		t += v
	}
	return t
}

func (n *NamespaceStat) add(o *NamespaceStat) {
	for k, v := range o.Containers {
		n.Containers[k] += v
	}
	n.PayloadBytes += o.PayloadBytes
}

// NamespaceTally accumulates containers by namespace during one relist,
// keyed by the namespace exactly as the runtime sent it ("" for none).
type NamespaceTally map[string]*NamespaceStat

// Add counts one container.
func (t NamespaceTally) Add(namespace, state string, bytes int) {
	s, ok := t[namespace]
	if !ok {
		s = &NamespaceStat{Namespace: namespace, Containers: map[string]int{}}
		t[namespace] = s
	}
	s.Containers[state]++
	s.PayloadBytes += int64(bytes)
}

// Top returns the n namespaces with the most containers (ties by payload,
// then name) and, when there are more, their sum as "other". The result has
// at most n+1 entries whatever the node holds: the label's cardinality is
// bounded by --collector.namespaces.top. Its Namespace fields are label
// values (NamespaceLabel), each one once.
func (t NamespaceTally) Top(n int) []NamespaceStat {
	byLabel := make(map[string]*NamespaceStat, len(t))
	all := make([]*NamespaceStat, 0, len(t))
	for ns, s := range t {
		label := NamespaceLabel(ns)
		m, ok := byLabel[label]
		if !ok {
			m = &NamespaceStat{Namespace: label, Containers: map[string]int{}}
			byLabel[label] = m
			all = append(all, m)
		}
		m.add(s)
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.total() != b.total() {
			return a.total() > b.total()
		}
		if a.PayloadBytes != b.PayloadBytes {
			return a.PayloadBytes > b.PayloadBytes
		}
		return a.Namespace < b.Namespace
	})
	out := make([]NamespaceStat, 0, min(n, len(all))+1)
	var other *NamespaceStat
	for i, s := range all {
		if i < n {
			out = append(out, *s)
			continue
		}
		if other == nil {
			other = &NamespaceStat{Namespace: OtherNamespace, Containers: map[string]int{}}
		}
		other.add(s)
	}
	if other != nil {
		out = append(out, *other)
	}
	return out
}
