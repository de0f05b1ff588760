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

package testenv

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// klog's header dated right at every hour, minute and second, 08 and 09
// included (which fmt.Sscan took for bad octal and read as 0).
func TestKlogTime(t *testing.T) {
	ref := time.Date(2026, 12, 7, 12, 0, 0, 0, time.Local)
	for _, c := range []struct {
		line string
		want time.Time
	}{
		{"E1207 08:09:08.000009    9582 generic.go:312] x", time.Date(2026, 12, 7, 8, 9, 8, 9000, time.Local)},
		{"I0109 09:08:09.123456    1 a.go:1] y", time.Date(2026, 1, 9, 9, 8, 9, 123456000, time.Local)},
		{"W1231 23:59:59.999999    1 a.go:1] z", time.Date(2026, 12, 31, 23, 59, 59, 999999000, time.Local)},
	} {
		got, ok := klogTime(c.line, ref)
		if !ok || !got.Equal(c.want) {
			t.Errorf("klogTime(%q) = %v, %v; want %v", c.line, got, ok, c.want)
		}
	}
	if _, ok := klogTime("not a klog line", ref); ok {
		t.Error("a line without klog's header was dated")
	}
}

// FindLog sees lines appended after an earlier read, dated by their header.
func TestFindLogReadsOn(t *testing.T) {
	p := filepath.Join(t.TempDir(), "kubelet.log")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	k := &Kubelet{LogPath: p}
	since := time.Date(2026, 12, 7, 8, 9, 0, 0, time.Local)
	f.WriteString("E1207 08:08:59.000000    1 a.go:1] failed before\n")
	if _, ok := k.FindLog(since, "failed"); ok {
		t.Fatal("a line from before since was found")
	}
	f.WriteString("E1207 08:09:01.000000    1 a.go:1] failed after\nE1207 08:09:02.0")
	l, ok := k.FindLog(since, "failed")
	if !ok || l.Text != "E1207 08:09:01.000000    1 a.go:1] failed after" {
		t.Fatalf("FindLog = %q, %v", l.Text, ok)
	}
	f.WriteString("00000    1 a.go:1] the partial line, completed\n")
	if l, ok := k.FindLog(since, "completed"); !ok || !l.At.Equal(since.Add(2*time.Second)) {
		t.Errorf("the completed partial line: %q at %v, %v", l.Text, l.At, ok)
	}
}
