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

// Command funclen fails when a function outside the tests is longer than
// -max lines (make lint): long functions holding dense logic were what
// slowed the next engineer down, so the rule is checked, not reviewed.
//
//	go run ./internal/cmd/funclen [-max 80] FILE...
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"sort"
	"strings"
)

func main() {
	maxLines := flag.Int("max", 80, "the most lines a function may have, its signature and closing brace included")
	flag.Parse()
	long, err := check(flag.Args(), *maxLines)
	if err != nil {
		fmt.Fprintln(os.Stderr, "funclen:", err)
		os.Exit(2)
	}
	if report(os.Stdout, long, *maxLines) {
		os.Exit(1)
	}
}

// fn is a function and its length in lines.
type fn struct {
	where string // file:line
	name  string
	lines int
}

// check parses each non-test Go file and returns its functions longer
// than maxLines, the longest first.
func check(files []string, maxLines int) ([]fn, error) {
	var long []fn
	for _, path := range files {
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			continue
		}
		fs := token.NewFileSet()
		f, err := parser.ParseFile(fs, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			start, end := fs.Position(fd.Pos()), fs.Position(fd.End())
			if n := end.Line - start.Line + 1; n > maxLines {
				long = append(long, fn{where: fmt.Sprintf("%s:%d", path, start.Line), name: funcName(fd), lines: n})
			}
		}
	}
	sort.SliceStable(long, func(i, j int) bool { return long[i].lines > long[j].lines })
	return long, nil
}

// report prints the long functions and says whether there were any.
func report(w io.Writer, long []fn, maxLines int) bool {
	if len(long) == 0 {
		return false
	}
	fmt.Fprintf(w, "functions longer than %d lines (split them by concern):\n", maxLines)
	for _, f := range long {
		fmt.Fprintf(w, "  %s: %s, %d lines\n", f.where, f.name, f.lines)
	}
	return true
}

// funcName is Recv.Name for a method, Name for a function.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
			continue
		case *ast.IndexExpr:
			t = x.X
			continue
		case *ast.IndexListExpr:
			t = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + fd.Name.Name
		}
		return fd.Name.Name
	}
}
