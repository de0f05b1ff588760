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
	"fmt"
	"strings"
)

// GRPCLimitBytes is the kubelet's gRPC receive limit (16 MiB, gRPC's
// default maximum message size), which every list answer is measured
// against; containerd and cri-dockerd send no more either.
const GRPCLimitBytes = 16 << 20

// The gRPC codes ErrorCode returns that the exporter acts on, as their
// names (codes.Code.String: format_test.go holds them to it).
const (
	CodeResourceExhausted = "ResourceExhausted" // an answer over the payload limit
	CodeDeadlineExceeded  = "DeadlineExceeded"  // the runtime hung
	CodeUnavailable       = "Unavailable"       // the runtime is not reachable
	CodeNotFound          = "NotFound"          // the item is gone
)

// ShortID is an id as crictl prints it, its first 13 characters.
func ShortID(id string) string {
	if len(id) > 13 {
		return id[:13]
	}
	return id
}

// FormatBytes is a size in B, KiB or MiB, for a person.
func FormatBytes(b int64) string {
	switch {
	case b >= 1<<20 || b <= -1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10 || b <= -1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}

// FormatStates is a total and its parts in the given order: "12 (created
// 2, running 10)".
func FormatStates(m map[string]int, order []string) string {
	total := 0
	var parts []string
	for _, s := range order {
		total += m[s]
		parts = append(parts, fmt.Sprintf("%s %d", s, m[s]))
	}
	return fmt.Sprintf("%d (%s)", total, strings.Join(parts, ", "))
}
