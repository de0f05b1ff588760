package deploy

import (
	"os"
	"os/exec"
	"testing"
)

func requireTool(t *testing.T, name string) string {
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

const amConfig = "alertmanager/alertmanager.yml"

func TestAlertmanagerConfig(t *testing.T) {
	amtool := requireTool(t, "amtool")
	if out, err := exec.Command(amtool, "check-config", amConfig).CombinedOutput(); err != nil {
		t.Fatalf("amtool check-config: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		receiver string
		labels   []string
	}{
		{"pager", []string{"alertname=PLEGRelistStalled", "severity=critical", "node=n1"}},
		{"pager", []string{"alertname=PLEGPayloadOverLimit", "severity=critical", "node=n1"}},
		{"chat", []string{"alertname=PLEGRelistStalled", "severity=warning", "node=n1"}},
		{"chat", []string{"alertname=PLEGExitedContainersPilingUp", "severity=warning", "node=n1"}},
		{"chat", []string{"alertname=SomethingElse", "severity=critical"}},
	} {
		args := append([]string{"config", "routes", "test", "--config.file=" + amConfig, "--verify.receivers=" + tc.receiver}, tc.labels...)
		if out, err := exec.Command(amtool, args...).CombinedOutput(); err != nil {
			t.Errorf("%v should route to %s: %v\n%s", tc.labels, tc.receiver, err, out)
		}
	}
}
