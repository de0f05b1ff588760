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
	"testing"
	"time"
)

// BenchmarkChanges is the churn bookkeeping of one relist of 3,000
// containers in 300 pods, 30 of whose containers change state each relist:
// what the relist's visitor calls while the list answers are read
// (Sandbox, Container: inside pleg_relist_last_duration_seconds), and End,
// after them. record-ns/op is the first part alone.
func BenchmarkChanges(b *testing.B) {
	const pods, containers = 300, 3000
	var sbIDs, uids, ctIDs [][]byte
	for i := 0; i < pods; i++ {
		sbIDs = append(sbIDs, fmt.Appendf(nil, "%064x", uint64(0xa0)<<56|uint64(i)))
		uids = append(uids, fmt.Appendf(nil, "%08x-0000-4000-8000-%012x", i, i))
	}
	for i := 0; i < containers; i++ {
		ctIDs = append(ctIDs, fmt.Appendf(nil, "%064x", uint64(0xc0)<<56|uint64(i)))
	}
	c := NewChanges()
	var record time.Duration
	b.ReportAllocs()
	for n := 0; b.Loop(); n++ {
		t0 := time.Now()
		c.Begin()
		for i := range sbIDs {
			c.Sandbox(sbIDs[i], uids[i], 0)
		}
		for i := range ctIDs {
			state := int32(1)
			if i%100 == n%100 {
				state = 2 // this relist's changes
			}
			c.Container(ctIDs[i], sbIDs[i%pods], state)
		}
		record += time.Since(t0)
		c.End(true)
	}
	b.ReportMetric(float64(record)/float64(b.N), "record-ns/op")
}
