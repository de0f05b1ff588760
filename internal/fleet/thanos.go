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
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pleg-exporter/pleg_exporter/internal/measure"
)

// ThanosVersion is the Thanos make test builds (Makefile THANOS_VERSION).
const ThanosVersion = "v0.42.5"

// ThanosServer is a Thanos component with its gRPC store API address.
type ThanosServer struct {
	*Server
	GRPC string
}

// startThanos starts a component on a free HTTP port and on grpc, or a
// free gRPC port when grpc is empty.
func startThanos(kind, dir, bin, grpc string, args func(http, grpc string) []string) (*ThanosServer, error) {
	if grpc == "" {
		var err error
		if grpc, err = measure.FreeAddr(); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	s, err := start(kind, dir, bin, func(addr string) []string { return args(addr, grpc) }, "/-/ready")
	if err != nil {
		return nil, err
	}
	return &ThanosServer{Server: s, GRPC: grpc}, nil
}

// StartSidecar starts a Thanos sidecar beside a Prometheus started with
// PrometheusOptions.Sidecar: it serves the Prometheus' series, with its
// external labels, to Thanos Query.
func StartSidecar(bin, dir string, prom *Server, promData, promConfig string) (*ThanosServer, error) {
	return startThanos("thanos-sidecar", dir, bin, "", func(http, grpc string) []string {
		return []string{"sidecar", "--tsdb.path=" + promData, "--prometheus.url=" + prom.URL(),
			"--http-address=" + http, "--grpc-address=" + grpc, "--log.level=warn",
			// The configuration it watches, as kube-prometheus' sidecar
			// does, written out into its own directory.
			"--reloader.config-file=" + promConfig, "--reloader.config-envsubst-file=" + filepath.Join(dir, "prometheus.yml")}
	})
}

// StartQuery starts Thanos Query over store API endpoints.
func StartQuery(bin, dir string, endpoints ...string) (*ThanosServer, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "endpoints.yaml")
	var b strings.Builder
	b.WriteString("endpoints:\n")
	for _, e := range endpoints {
		fmt.Fprintf(&b, "  - address: %q\n", e)
	}
	if err := os.WriteFile(cfg, []byte(b.String()), 0o644); err != nil {
		return nil, err
	}
	return startThanos("thanos-query", dir, bin, "", func(http, grpc string) []string {
		return []string{"query", "--http-address=" + http, "--grpc-address=" + grpc, "--log.level=warn",
			"--endpoint.sd-config-file=" + cfg,
			// The Ruler's records, where a Prometheus records the same,
			// are one series.
			"--query.replica-label=ruler_replica"}
	})
}

// StartRuler starts Thanos Ruler evaluating rule files against a Query and
// sending its alerts to Alertmanager, as kube-thanos deploys it; grpc is its
// store API address (the Query, started first, reads its recorded series
// there).
func StartRuler(bin, dir, grpc, query, alertmanager string, interval time.Duration, ruleFiles ...string) (*ThanosServer, error) {
	return startThanos("thanos-rule", dir, bin, grpc, func(http, grpc string) []string {
		args := []string{"rule", "--data-dir=" + filepath.Join(dir, "data"), "--eval-interval=" + interval.String(),
			"--query=" + query, "--alertmanagers.url=http://" + alertmanager, `--label=ruler_replica="0"`,
			"--http-address=" + http, "--grpc-address=" + grpc, "--log.level=warn"}
		for _, f := range ruleFiles {
			args = append(args, "--rule-file="+f)
		}
		return args
	})
}
