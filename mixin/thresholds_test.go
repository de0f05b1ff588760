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

package mixin

import (
	"encoding/json"
	"testing"

	"github.com/google/go-jsonnet"

	"github.com/pleg-exporter/pleg_exporter/diagnose"
)

// diagnose calls a node "at risk" at the mixin's warning thresholds: the
// report and the alerts must not disagree about the same node. The mixin's
// _config is the source; this fails when either side changes alone.
func TestDiagnoseThresholdsAreTheMixins(t *testing.T) {
	vm := jsonnet.MakeVM()
	vm.Importer(&jsonnet.FileImporter{JPaths: []string{"."}})
	out, err := vm.EvaluateAnonymousSnippet("config", `local c = (import "mixin.libsonnet")._config; {
  limit: c.kubeletGrpcLimitBytes,
  ratio: c.plegPayloadWarningRatio,
  exited: c.plegExitedContainersWarning,
  notready: c.plegNotReadySandboxesWarning,
}`)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Limit    int64   `json:"limit"`
		Ratio    float64 `json:"ratio"`
		Exited   int     `json:"exited"`
		NotReady int     `json:"notready"`
	}
	if err := json.Unmarshal([]byte(out), &cfg); err != nil {
		t.Fatal(err)
	}
	th := diagnose.DefaultThresholds
	for _, c := range []struct {
		name         string
		diagnose, mx any
	}{
		{"LimitBytes / kubeletGrpcLimitBytes", th.LimitBytes, cfg.Limit},
		{"PayloadRatio / plegPayloadWarningRatio", th.PayloadRatio, cfg.Ratio},
		{"ExitedContainers / plegExitedContainersWarning", th.ExitedContainers, cfg.Exited},
		{"NotReadySandboxes / plegNotReadySandboxesWarning", th.NotReadySandboxes, cfg.NotReady},
	} {
		if c.diagnose != c.mx {
			t.Errorf("%s: diagnose says %v, the mixin %v", c.name, c.diagnose, c.mx)
		}
	}
}
