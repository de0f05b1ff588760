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
	"os"
	"runtime/debug"
)

// The Go runtime tuning of the exporter, all of it, in one place.
//
// A relist holds one large answer for a moment (tens of MiB past the
// kubelet's limit). With the default GOGC=100 the heap may grow to twice
// that before a collection; at 50 the peak stays near the answer itself. But
// 50 for the whole process made the idle exporter's small heap collect every
// few scrapes, which doubled the scrape latency's p99 (docs/benchmarks.md).
// So the lower percent applies only while a relist holds its answer, and
// after a large answer the freed memory goes back to the OS at once rather
// than minutes later, so the RSS on a troubled node stays flat between
// relists. A GOGC from the environment wins: then nothing is changed.

// relistGCPercent is the GC percent in force during a relist.
const relistGCPercent = 50

// releaseAfterBytes is the answer size past which a relist returns its
// memory to the OS at once.
const releaseAfterBytes = 4 << 20

// memoryTuning lowers the GC percent around relists and releases memory
// after large ones.
type memoryTuning struct {
	on      bool // off: disabled, or a GOGC from the environment
	percent int  // 0: leave the GC percent alone
}

// newMemoryTuning reads the process's setting once, while the heap is still
// small. It never raises a lower setting nor turns GC on, and stays out of
// the way of a GOGC from the environment.
func newMemoryTuning(enabled bool) memoryTuning {
	if !enabled || os.Getenv("GOGC") != "" {
		return memoryTuning{}
	}
	// Go has no getter: read the setting by setting it.
	base := debug.SetGCPercent(relistGCPercent)
	debug.SetGCPercent(base)
	if base < relistGCPercent {
		return memoryTuning{on: true}
	}
	return memoryTuning{on: true, percent: relistGCPercent}
}

// during lowers the GC percent for one relist; call the returned function
// when the relist has let go of its answer. SetGCPercent takes the heap
// lock, not the world: cheap enough twice a relist.
func (m memoryTuning) during() (restore func()) {
	if m.percent <= 0 {
		return func() {}
	}
	prev := debug.SetGCPercent(m.percent)
	return func() { debug.SetGCPercent(prev) }
}

// after hands the memory of a large answer back to the OS. Twice: gRPC pools
// its receive buffers, and a pooled buffer survives the first collection in
// the pool's victim cache.
// Nothing when the tuning is off: with a GOGC from the environment the
// operator's collector settings stand, as the comment at the top says.
func (m memoryTuning) after(answerBytes int64) {
	if m.on && answerBytes > releaseAfterBytes {
		freeOSMemory()
		freeOSMemory()
	}
}

// freeOSMemory is debug.FreeOSMemory; a test counts the calls.
var freeOSMemory = debug.FreeOSMemory
