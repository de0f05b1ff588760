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

package measure

import (
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	in := []float64{5, 1, 3}
	for _, tc := range []struct {
		v    []float64
		want float64
	}{{nil, 0}, {[]float64{2}, 2}, {in, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := Median(tc.v); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.v, got, tc.want)
		}
	}
	if in[0] != 5 {
		t.Error("Median sorted its argument")
	}
	if got := MedianDuration([]time.Duration{3 * time.Second, time.Second}); got != 2*time.Second {
		t.Errorf("MedianDuration = %s", got)
	}
	if a, err := FreeAddr(); err != nil || a == "" {
		t.Errorf("FreeAddr: %q, %v", a, err)
	}
}
