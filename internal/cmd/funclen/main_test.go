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
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A function one line over the limit is reported with its file, line,
// receiver and length; one at the limit, and any test file, are not.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	body := func(name string, lines int) string {
		// "func ... {" and "}" are two of the lines.
		return name + " {\n" + strings.Repeat("\t_ = 0\n", lines-2) + "}\n"
	}
	src := "package p\n\ntype T[X any] struct{}\n\n" + body("func ok()", 5) + body("func (t *T[X]) Long()", 6) + body("func long()", 7)
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := write("p.go", src)
	tp := write("p_test.go", src)
	long, err := check([]string{p, tp, filepath.Join(dir, "README.md")}, 5)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if !report(&out, long, 5) {
		t.Fatal("no long function reported")
	}
	want := "functions longer than 5 lines (split them by concern):\n" +
		"  " + p + ":16: long, 7 lines\n" +
		"  " + p + ":10: T.Long, 6 lines\n"
	if out.String() != want {
		t.Errorf("report:\n%s\nwant:\n%s", out.String(), want)
	}
	if long, _ := check([]string{p}, 7); report(&bytes.Buffer{}, long, 7) {
		t.Errorf("a limit of 7 reported %v", long)
	}
	if _, err := check([]string{write("bad.go", "package p\nfunc {")}, 80); err == nil {
		t.Error("a file that does not parse: no error")
	}
}
