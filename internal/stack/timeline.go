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
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"
)

// Timeline is what Prometheus and the kubelet saw around a fault, for a
// plot (internal/cmd/timeline): series as seconds since T0 and values,
// the alerts' first firing, and the kubelet's "PLEG is not healthy".
type Timeline struct {
	What       string                  `json:"what"`
	T0         time.Time               `json:"t0"`          // the fault, as the kubelet logged it
	NotHealthy float64                 `json:"not_healthy"` // seconds after T0
	Series     map[string][][2]float64 `json:"series"`      // name -> (seconds after T0, value)
	Alerts     map[string]float64      `json:"alerts"`      // alert name -> first firing, seconds after T0
}

// TimelineQueries are the series a timeline plots.
var TimelineQueries = map[string]string{
	"exporter_age":      `max(pleg_last_seen_seconds)`,
	"kubelet_age":       `max(time() - kubelet_pleg_last_seen_seconds)`,
	"payload_ratio":     `max(pleg_relist_payload_bytes{rpc="ListContainers"} / ignoring(rpc) pleg_relist_payload_limit_bytes)`,
	"threshold_seconds": `max(pleg_relist_threshold_seconds)`,
}

// RecordTimeline reads the timeline's series from start to end at step.
func (a API) RecordTimeline(ctx context.Context, tl *Timeline, start, end time.Time, step time.Duration) error {
	tl.Series = map[string][][2]float64{}
	for name, q := range TimelineQueries {
		series, err := a.QueryRange(ctx, q, start, end, step)
		if err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
		for _, sr := range series {
			for _, v := range sr.Values {
				at, _ := v[0].(float64)
				str, _ := v[1].(string)
				f, err := strconv.ParseFloat(str, 64)
				if err != nil {
					continue
				}
				tl.Series[name] = append(tl.Series[name], [2]float64{at - float64(tl.T0.UnixMilli())/1000, f})
			}
		}
	}
	return nil
}

// WriteTimeline writes tl as indented JSON.
func WriteTimeline(path string, tl *Timeline) error {
	b, err := json.MarshalIndent(tl, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadTimeline reads what WriteTimeline wrote.
func ReadTimeline(path string) (*Timeline, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var tl Timeline
	if err := json.Unmarshal(b, &tl); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &tl, nil
}
