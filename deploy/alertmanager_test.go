package deploy

import (
	"os/exec"
	"testing"

	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
)

const amConfig = "alertmanager/alertmanager.yml"

func TestAlertmanagerConfig(t *testing.T) {
	amtool := testenv.RequireTool(t, "amtool")
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
