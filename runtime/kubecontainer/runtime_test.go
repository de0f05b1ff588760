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

package kubecontainer

import "testing"

func TestParseMessageSize(t *testing.T) {
	for msg, want := range map[string][2]int64{
		"grpc: trying to send message larger than max (16783506 vs. 16777216)":                                    {16783506, 16777216},
		"rpc error: code = ResourceExhausted desc = grpc: received message larger than max (4195017 vs. 4194304)": {4195017, 4194304},
	} {
		size, limit, ok := ParseMessageSize(msg)
		if !ok || size != want[0] || limit != want[1] {
			t.Errorf("%q: %d %d %v", msg, size, limit, ok)
		}
	}
	for _, msg := range []string{"", "larger than max", "message larger than max (abc vs. 1)", "message larger than max (99999999999999999999 vs. 1)"} {
		if _, _, ok := ParseMessageSize(msg); ok {
			t.Errorf("%q parsed", msg)
		}
	}
}

func FuzzParseMessageSize(f *testing.F) {
	f.Add("grpc: trying to send message larger than max (16783506 vs. 16777216)")
	f.Add("message larger than max (1 vs. 2)")
	f.Add("")
	f.Fuzz(func(t *testing.T, msg string) {
		size, limit, ok := ParseMessageSize(msg)
		if ok && (size < 0 || limit < 0) {
			t.Errorf("negative sizes from %q", msg)
		}
		if !ok && (size != 0 || limit != 0) {
			t.Errorf("sizes without ok from %q", msg)
		}
	})
}
