package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// RequireTool returns the path of a command the tests need. Outside CI a
// missing one skips the test with the reason; in CI (CI set) it fails it,
// because make test must have installed it.
func RequireTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s not installed; make test installs it", name)
		}
		t.Skipf("%s not installed (make test installs it)", name)
	}
	return p
}
