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
