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

// Command mixin-render writes the rendered mixin: alerts and rules YAML and
// the Grafana dashboards. make mixin runs it from the repository root.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/pleg-exporter/pleg_exporter/mixin"
)

func main() {
	files, err := mixin.Render("mixin")
	if err != nil {
		fmt.Fprintln(os.Stderr, "mixin-render:", err)
		os.Exit(1)
	}
	for _, name := range mixin.Names(files) {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "mixin-render:", err)
			os.Exit(1)
		}
		if err := os.WriteFile(name, files[name], 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "mixin-render:", err)
			os.Exit(1)
		}
		fmt.Println("wrote", name)
	}
}
