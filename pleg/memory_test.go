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

package pleg

import (
	"runtime/debug"
	"testing"
)

// A GOGC from the environment leaves the collector alone: no lower percent
// during a relist and no forced collections after a large answer.
func TestMemoryTuningStaysOutOfAGOGCFromTheEnvironment(t *testing.T) {
	calls := 0
	old := freeOSMemory
	freeOSMemory = func() { calls++ }
	t.Cleanup(func() { freeOSMemory = old })
	const large = releaseAfterBytes + 1
	for _, c := range []struct {
		name    string
		gogc    string
		enabled bool
		want    int
	}{
		{"tuned", "", true, 2},
		{"GOGC set", "200", true, 0},
		{"disabled", "", false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("GOGC", c.gogc)
			calls = 0
			m := newMemoryTuning(c.enabled)
			before := debug.SetGCPercent(100)
			debug.SetGCPercent(before)
			restore := m.during()
			during := debug.SetGCPercent(before)
			debug.SetGCPercent(during)
			restore()
			m.after(large)
			m.after(releaseAfterBytes) // small: never
			if calls != c.want {
				t.Errorf("FreeOSMemory called %d times after a large answer, want %d", calls, c.want)
			}
			if wantDuring := map[bool]int{true: relistGCPercent, false: before}[c.want > 0]; during != wantDuring {
				t.Errorf("GC percent during a relist %d, want %d", during, wantDuring)
			}
		})
	}
}
