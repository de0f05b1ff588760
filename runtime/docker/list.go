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

package docker

import (
	"encoding/json"
	"fmt"
	"io"
)

// Summary is the part of one item of GET /containers/json that the
// conversion reads. The rest of each item (command, ports, mounts, networks)
// is skipped while decoding.
type Summary struct {
	ID      string `json:"Id"`
	Names   []string
	Image   string
	ImageID string
	Created int64
	State   string
	Status  string
	Labels  map[string]string
}

// decodeList reads a /containers/json answer one container at a time into
// one reused Summary, so a relist's memory does not grow with the number of
// containers: the decoder holds one item, the caller the aggregates. fn must
// not keep s, s.Names or s.Labels; the strings in them it may keep.
func decodeList(r io.Reader, fn func(s *Summary)) error {
	dec := json.NewDecoder(r)
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("decode container list: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return fmt.Errorf("decode container list: want an array, got %v", tok)
	}
	var s Summary
	for dec.More() {
		// Decoding into a map adds to it and a missing field keeps its old
		// value: start each item from empty, on the same backing storage.
		clear(s.Labels)
		s = Summary{Names: s.Names[:0], Labels: s.Labels}
		if err := dec.Decode(&s); err != nil {
			return fmt.Errorf("decode container list: %w", err)
		}
		fn(&s)
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("decode container list: %w", err)
	}
	return nil
}
