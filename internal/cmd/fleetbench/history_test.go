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

package main

import (
	"context"
	"testing"
	"time"

	"github.com/pleg-exporter/pleg_exporter/internal/fleet"
)

func BenchmarkHistory(b *testing.B) {
	ctx := context.Background()
	rec, err := fleet.Record(ctx, fleet.DefaultRecordConfig(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		s, err := fleet.New(fleet.Config{Nodes: 100, Seed: 1, FaultAfter: 2 * time.Minute, Start: time.Now().Add(-time.Hour)}, rec)
		if err != nil {
			b.Fatal(err)
		}
		n, _, err := writeHistory(ctx, s, map[string]string{"sim": b.TempDir()}, all)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(n), "samples/op")
		s.Stop()
	}
}
