package kubecontainer

import "sort"

// OtherNamespace labels the sum of the namespaces outside the top N.
const OtherNamespace = "other"

// NoNamespace stands for a container without the kubelet's namespace label.
const NoNamespace = "(none)"

// NamespaceStat is one namespace's share of a relist.
type NamespaceStat struct {
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

// NamespaceTally accumulates containers by namespace during one relist.
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
// bounded by --collector.namespaces.top.
func (t NamespaceTally) Top(n int) []NamespaceStat {
	all := make([]*NamespaceStat, 0, len(t))
	for _, s := range t {
		if s.Namespace == "" {
			s.Namespace = NoNamespace
		}
		all = append(all, s)
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
		if i < n && s.Namespace != OtherNamespace {
			out = append(out, *s)
			continue
		}
		if other == nil {
			other = &NamespaceStat{Namespace: OtherNamespace, Containers: map[string]int{}}
		}
		for k, v := range s.Containers {
			other.Containers[k] += v
		}
		other.PayloadBytes += s.PayloadBytes
	}
	if other != nil {
		out = append(out, *other)
	}
	return out
}
