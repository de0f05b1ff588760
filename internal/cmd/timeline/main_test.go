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
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pleg-exporter/pleg_exporter/internal/stack"
)

// A recorded timeline round-trips through its JSON and draws a PNG of the
// size asked; one without the exporter's series is an error.
func TestDraw(t *testing.T) {
	tl := &stack.Timeline{What: "test", T0: time.Unix(1_800_000_000, 0), NotHealthy: 181, Alerts: map[string]float64{"PLEGPayloadOverLimit": 25}, Series: map[string][][2]float64{}}
	for s := -30.0; s <= 240; s += 5 {
		tl.Series["exporter_age"] = append(tl.Series["exporter_age"], [2]float64{s, max(s, 0) + 2})
		tl.Series["kubelet_age"] = append(tl.Series["kubelet_age"], [2]float64{s, max(s, 0) + 1})
		tl.Series["payload_ratio"] = append(tl.Series["payload_ratio"], [2]float64{s, 1.07})
	}
	dir := t.TempDir()
	js := filepath.Join(dir, "t.json")
	if err := stack.WriteTimeline(js, tl); err != nil {
		t.Fatal(err)
	}
	back, err := stack.ReadTimeline(js)
	if err != nil || len(back.Series["kubelet_age"]) != len(tl.Series["kubelet_age"]) || back.NotHealthy != 181 {
		t.Fatalf("read back: %+v, %v", back, err)
	}
	out := filepath.Join(dir, "t.png")
	if err := draw2(back, out); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out)
	cfg, err := png.DecodeConfig(bytes.NewReader(b))
	if err != nil || cfg.Width < 1000 || cfg.Height < 600 {
		t.Fatalf("png: %+v, %v", cfg, err)
	}
	if err := draw2(&stack.Timeline{}, out); err == nil {
		t.Error("a timeline without series drew")
	}
}
