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

package fleet

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
)

// TestInhibitionPerCluster: the example Alertmanager configuration's
// inhibit rules (deploy/alertmanager), in a real Alertmanager that two
// clusters with the same node names send to, silence an alert only with
// another of its own cluster and node.
func TestInhibitionPerCluster(t *testing.T) {
	testenv.RequireTool(t, "prometheus-alertmanager")
	if os.Geteuid() != 0 {
		t.Skip("needs root: the harness records its daemons in " + testenv.LedgerDir)
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "alertmanager", "alertmanager.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Inhibit []any `json:"inhibit_rules"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil || len(cfg.Inhibit) == 0 {
		t.Fatalf("deploy/alertmanager/alertmanager.yml: %d inhibit rules, %v", len(cfg.Inhibit), err)
	}
	inhibit, err := yaml.Marshal(map[string]any{"inhibit_rules": cfg.Inhibit})
	if err != nil {
		t.Fatal(err)
	}
	am, err := StartAlertmanager(filepath.Join(t.TempDir(), "am"), string(inhibit))
	if err != nil {
		t.Fatal(err)
	}
	defer am.Stop()
	a := func(name, severity, cluster, node string) map[string]string {
		return map[string]string{"alertname": name, "severity": severity, "cluster": cluster, "node": node}
	}
	ctx := context.Background()
	if err := PostAlerts(ctx, am,
		a("PLEGPayloadOverLimit", "critical", "east", "n1"),
		a("PLEGRelistStalled", "warning", "east", "n1"), // the overflow's consequence
		a("PLEGRelistStalled", "warning", "west", "n1"), // another cluster's node of the same name
		a("PLEGRelistStalled", "critical", "west", "n2"),
		a("PLEGRelistStalled", "warning", "west", "n2"), // its own critical
		a("PLEGRelistStalled", "warning", "east", "n2"),
	); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"PLEGPayloadOverLimit/east/n1": "active", "PLEGRelistStalled/warning/east/n1": "suppressed",
		"PLEGRelistStalled/warning/west/n1": "active", "PLEGRelistStalled/critical/west/n2": "active",
		"PLEGRelistStalled/warning/west/n2": "suppressed", "PLEGRelistStalled/warning/east/n2": "active",
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		alerts, err := Alerts(ctx, am)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, al := range alerts {
			key := al.Labels["alertname"] + "/" + al.Labels["severity"] + "/" + al.Labels["cluster"] + "/" + al.Labels["node"]
			if al.Labels["alertname"] == "PLEGPayloadOverLimit" {
				key = al.Labels["alertname"] + "/" + al.Labels["cluster"] + "/" + al.Labels["node"]
			}
			got[key] = al.Status.State
		}
		wrong := 0
		for k, v := range want {
			if got[k] != v {
				wrong++
				if time.Now().After(deadline) {
					t.Errorf("%s: %q, want %q", k, got[k], v)
				}
			}
		}
		if wrong == 0 || time.Now().After(deadline) {
			return
		}
		time.Sleep(time.Second)
	}
}
