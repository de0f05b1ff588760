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

// Command recordings keeps the committed recordings of make test-kubelets
// (testdata/kubelets) honest: a live run's recording either behaves as the
// committed one of its kubelet, runtime and gates (the same checks, quiet
// where it was quiet, paging with one of the same critical alerts where it
// paged; stack.SameChecks), or the target fails; a cell recorded for the
// first time, or with -update, replaces it.
//
//	recordings [-update] LIVE.yaml DIR
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pleg-exporter/pleg_exporter/internal/stack"
)

func main() {
	update := flag.Bool("update", false, "replace the committed recording with the live one even when they differ")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: recordings [-update] LIVE.yaml DIR")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), flag.Arg(1), *update); err != nil {
		fmt.Fprintln(os.Stderr, "recordings:", err)
		os.Exit(1)
	}
}

func run(livePath, dir string, update bool) error {
	live, err := stack.ReadRecording(livePath)
	if err != nil {
		return err
	}
	committed := filepath.Join(dir, live.Cell()+".yaml")
	old, err := stack.ReadRecording(committed)
	switch {
	case os.IsNotExist(err) || update:
		b, err := os.ReadFile(livePath)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(committed, b, 0o644); err != nil {
			return err
		}
		fmt.Printf("recordings: wrote %s (%d checks)\n", committed, len(live.Checks))
		return nil
	case err != nil:
		return err
	}
	if err := stack.SameChecks(old, live); err != nil {
		return fmt.Errorf("%s: %w (make test-kubelets RECORD_UPDATE=1 replaces it once the change is understood)", committed, err)
	}
	fmt.Printf("recordings: %s matches the live run (%d checks)\n", committed, len(live.Checks))
	for _, d := range stack.Drift(old, live) {
		fmt.Printf("recordings: %s: timing drift, not a failure: %s\n", live.Cell(), d)
	}
	return nil
}
