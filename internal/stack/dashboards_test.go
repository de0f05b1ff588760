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

package stack

import (
	"fmt"
	"path/filepath"
	"testing"
)

// The committed dashboards' query variables parse as label_values over the
// exporter's series; the datasource variable is not one.
func TestVariablesOfTheDashboards(t *testing.T) {
	files, _ := filepath.Glob("../../dashboards/*.json")
	if len(files) < 2 {
		t.Fatalf("dashboards: %v", files)
	}
	vars, err := Variables(files)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range vars {
		got[v.Dashboard+"/"+v.Name] = fmt.Sprintf("%s by %s hidden=%v", v.Selector, v.Label, v.Hidden)
	}
	want := map[string]string{
		"pleg-node.json/cluster":  `pleg_runtime_up{job="pleg-exporter"} by cluster hidden=true`,
		"pleg-node.json/node":     `pleg_runtime_up{job="pleg-exporter"} by node hidden=false`,
		"pleg-fleet.json/cluster": `pleg_runtime_up{job="pleg-exporter"} by cluster hidden=true`,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("variables:\n got %v\nwant %v", got, want)
	}
}

// A failed query and an empty panel are problems; an empty panel the
// caller allows is only listed.
func TestCheckPanels(t *testing.T) {
	panels := []Panel{
		{Dashboard: "d", Title: "ok", Queries: 2, WithData: 1},
		{Dashboard: "d", Title: "broken", Queries: 1, WithData: 1, Errors: []string{"parse error"}},
		{Dashboard: "d", Title: "empty", Queries: 1},
		{Dashboard: "d", Title: "Docker", Queries: 3},
	}
	queries, empty, problems := CheckPanels(panels, map[string]bool{"Docker": true})
	if queries != 7 || fmt.Sprint(empty) != "[d / empty d / Docker]" || len(problems) != 2 {
		t.Errorf("queries %d, empty %v, problems %q", queries, empty, problems)
	}
}
