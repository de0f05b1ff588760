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
