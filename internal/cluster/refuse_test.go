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

package cluster

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
)

// The operator's Prometheus needs fixed addresses on the host network
// (127.0.0.1:9090 and its reloader's :8080); a host where something else
// holds one is refused with that reason before anything starts.
func TestMonitoringRefusesTakenAddress(t *testing.T) {
	for _, addr := range []string{PrometheusAddr, reloaderAddr} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Skipf("skipping: %s is taken on this machine already: %v", addr, err)
		}
		_, err = (&Cluster{}).StartMonitoring(context.Background(), MonitoringOptions{})
		l.Close()
		if !errors.Is(err, testenv.ErrUnavailable) || !strings.Contains(err.Error(), "needs "+addr) {
			t.Errorf("with %s taken: %v, want it refused naming the address", addr, err)
		}
	}
}
