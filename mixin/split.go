package mixin

import (
	"encoding/json"
	"fmt"
)

// splitDashboards decodes {"name.json": "<manifested json>"}.
func splitDashboards(s string) (map[string]string, error) {
	var m map[string]string
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("dashboards: %w", err)
	}
	return m, nil
}
