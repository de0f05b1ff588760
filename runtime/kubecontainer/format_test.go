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

import (
	"testing"

	"google.golang.org/grpc/codes"
)

func TestCodesAreGRPCs(t *testing.T) {
	for name, c := range map[string]codes.Code{
		CodeResourceExhausted: codes.ResourceExhausted,
		CodeDeadlineExceeded:  codes.DeadlineExceeded,
		CodeUnavailable:       codes.Unavailable,
		CodeNotFound:          codes.NotFound,
	} {
		if name != c.String() {
			t.Errorf("%q is not gRPC's %q", name, c.String())
		}
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{FormatBytes(0), "0 B"},
		{FormatBytes(1023), "1023 B"},
		{FormatBytes(1536), "1.5 KiB"},
		{FormatBytes(GRPCLimitBytes), "16.0 MiB"},
		{FormatBytes(-2 << 20), "-2.0 MiB"},
		{FormatStates(map[string]int{"running": 10, "created": 2}, []string{"created", "running", "exited"}), "12 (created 2, running 10, exited 0)"},
		{ShortID("0123456789abcdef"), "0123456789abc"},
		{ShortID("abc"), "abc"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
