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

package main

import (
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/pleg-exporter/pleg_exporter/runtime/detect"
)

// Each command has the flags it reads and no other: `pleg_exporter gc
// --web.listen-address=…` is an error, not a flag silently ignored. serve is
// the default command, so the exporter's flags need no command name (the
// DaemonSet's and the unit's arguments). The log flags, --help and
// --version belong to every command.

// runtimeFlags are the flags every command reads the runtime with.
type runtimeFlags struct {
	kind, endpoint, dockerHost *string
	timeout                    *time.Duration
	limit                      *int64
	maxRecv                    *int
}

func addRuntimeFlags(c *kingpin.CmdClause) *runtimeFlags {
	return &runtimeFlags{
		kind: c.Flag("runtime", "Runtime API to relist through: auto, cri or docker. auto probes the usual containerd, CRI-O, cri-dockerd and Docker sockets, CRI first.").
			Default(detect.KindAuto).Enum(detect.KindAuto, detect.KindCRI, detect.KindDocker),
		endpoint: c.Flag("runtime.endpoint", "Runtime socket as a URL, the kubelet's --container-runtime-endpoint (e.g. unix:///run/containerd/containerd.sock). Empty: auto-detect.").
			Default("").String(),
		dockerHost: c.Flag("docker.host", "Docker daemon to read Docker-native states from on cri-dockerd nodes (only Docker shows dead containers). Empty: auto-detect on cri-dockerd nodes; none: off.").
			Default("").String(),
		timeout: c.Flag("relist.timeout", "Deadline of each runtime call, as the kubelet's --runtime-request-timeout.").
			Default("2m").Duration(),
		limit: c.Flag("pleg.grpc-limit-bytes", "The kubelet's gRPC receive limit that list answers are compared against.").
			Default(strconv.Itoa(defaultGRPCLimit)).Int64(),
		maxRecv: c.Flag("runtime.max-recv-bytes", "The exporter's own receive limit for one runtime answer (a gRPC message, a Docker container list), far above the kubelet's so answers past 16 MiB are still measured.").
			Default("268435456").Int(),
	}
}

// config is the runtime's configuration from the flags, checked.
func (f *runtimeFlags) config(logger *slog.Logger) (detect.Config, error) {
	cfg := detect.Config{
		Kind:         *f.kind,
		Endpoint:     *f.endpoint,
		DockerHost:   *f.dockerHost,
		MaxRecvBytes: *f.maxRecv,
		Timeout:      *f.timeout,
		Logger:       logger,
		LimitBytes:   *f.limit,
	}
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	switch {
	case *f.limit <= 0:
		return cfg, fmt.Errorf("--pleg.grpc-limit-bytes must be positive, got %d", *f.limit)
	case int64(*f.maxRecv) <= *f.limit:
		return cfg, fmt.Errorf("--runtime.max-recv-bytes (%d) must be above --pleg.grpc-limit-bytes (%d) to measure answers past the kubelet's limit", *f.maxRecv, *f.limit)
	}
	return cfg, nil
}

// inspectFlags are the status pass's and the probes' flags, which serve
// and diagnose share.
type inspectFlags struct {
	status   *bool
	probeMax *int
	timeout  *time.Duration
}

func addInspectFlags(c *kingpin.CmdClause, statusHelp string) *inspectFlags {
	return &inspectFlags{
		status: c.Flag("relist.status", statusHelp).Default("true").Bool(),
		probeMax: c.Flag("probe.max-per-cycle", "Status calls (PodSandboxStatus, ContainerStatus) on notready sandboxes and unknown containers per relist, oldest first and rotating; 0 disables the probes.").
			Default("20").Int(),
		timeout: c.Flag("probe.timeout", "Deadline of each status probe; a probe that reaches it is counted in pleg_status_probe_timeouts_total.").
			Default("5s").Duration(),
	}
}

// apply puts the probes' settings into cfg, checked.
func (f *inspectFlags) apply(cfg *detect.Config) error {
	switch {
	case *f.probeMax < 0:
		return fmt.Errorf("--probe.max-per-cycle must be 0 or more, got %d", *f.probeMax)
	case *f.timeout <= 0:
		return fmt.Errorf("--probe.timeout must be positive, got %s", *f.timeout)
	}
	cfg.ProbeMax, cfg.ProbeTimeout = *f.probeMax, *f.timeout
	return nil
}

var (
	serveCmd     = kingpin.Command("serve", "Relist in the background and serve /metrics (the default command: its flags need no command name).").Default()
	serveRuntime = addRuntimeFlags(serveCmd)
	serveInspect = addInspectFlags(serveCmd, "After the lists, inspect every pod that changed since the previous relist, and every pod whose inspection failed, the way the kubelet's relist does (GetPodStatus: a filtered list and a status call per sandbox and container, one after another, each with --relist.timeout), so pleg_last_seen_seconds grows through a hung status call as the kubelet's does. --no-relist.status turns it off.")

	relistInterval = serveCmd.Flag("relist.interval", "Pause between the end of one shadow relist and the start of the next (the kubelet relists every 1s; this adds one relist per interval).").
			Default("10s").Duration()
	plegThreshold = serveCmd.Flag("pleg.threshold", "The kubelet's PLEG threshold, exported as pleg_relist_threshold_seconds: 3m; 10m on kubelets v1.26-v1.36 with the EventedPLEG gate (v1.37 keeps 3m with it).").
			Default("3m").Duration()
	statusStartupPods = serveCmd.Flag("relist.status.startup-pods", "Pods already there when the exporter started that one relist inspects besides the changed ones, until all were inspected once, each on --probe.timeout: spreads a fleet-wide rollout's first inspections over minutes. 0: such pods are inspected only when they change.").
				Default("10").Int()
	nsEnabled = serveCmd.Flag("collector.namespaces", "Export containers and payload bytes by namespace (pleg_namespace_*), the top --collector.namespaces.top namespaces and the rest as namespace=\"other\".").
			Bool()
	nsTop = serveCmd.Flag("collector.namespaces.top", "How many namespaces --collector.namespaces names; the rest are summed as \"other\" (bounds the label's cardinality to N+1).").
		Default("10").Int()
	metricsPath = serveCmd.Flag("web.telemetry-path", "Path under which to expose metrics.").
			Default("/metrics").String()
	disableExporterMetrics = serveCmd.Flag("web.disable-exporter-metrics", "Exclude metrics about the exporter itself (promhttp_*, process_*, go_*).").
				Bool()
	maxRequests = serveCmd.Flag("web.max-requests", "Maximum number of parallel scrape requests. Use 0 to disable.").
			Default("40").Int()
	idleTimeout = serveCmd.Flag("web.idle-timeout", "How long a keep-alive connection may stay idle between requests before the exporter closes it. Keep it above the scrape interval so scrapes reuse their connection.").
			Default("2m").Duration()
	toolkitFlags = kingpinflag.AddFlags(serveCmd, defaultAddress)

	diagnoseCmd     = kingpin.Command("diagnose", "Relist once and report what threatens the node: counts, payload against the limit, the namespaces and pods that hold the containers, hanging status calls, and the cleanup commands. Exit 0 healthy, 1 at risk, 2 runtime unreachable, 3 the report could not be written.")
	diagnoseRuntime = addRuntimeFlags(diagnoseCmd)
	diagnoseInspect = addInspectFlags(diagnoseCmd, "Make the kubelet's GetPodStatus of every pod, each on --probe.timeout, and name the pods whose status calls fail or hang. --no-relist.status skips it.")
	diagnoseTop     = diagnoseCmd.Flag("top", "Namespaces and pods in each table of the report.").Default("10").Int()
	outputFmt       = diagnoseCmd.Flag("output", "Report format: text or json.").Default("text").Enum("text", "json")
)

// serveConfig is the exporter's runtime configuration, checked.
func serveConfig(logger *slog.Logger) (detect.Config, error) {
	cfg, err := serveRuntime.config(logger)
	if err != nil {
		return cfg, err
	}
	if err := serveInspect.apply(&cfg); err != nil {
		return cfg, err
	}
	if *nsEnabled {
		cfg.NamespacesTop = *nsTop
	}
	switch {
	case *relistInterval <= 0:
		return cfg, fmt.Errorf("--relist.interval must be positive, got %s", *relistInterval)
	case *plegThreshold <= 0:
		return cfg, fmt.Errorf("--pleg.threshold must be positive, got %s", *plegThreshold)
	case *idleTimeout <= 0:
		return cfg, fmt.Errorf("--web.idle-timeout must be positive, got %s", *idleTimeout)
	case *maxRequests < 0:
		return cfg, fmt.Errorf("--web.max-requests must be 0 or more, got %d", *maxRequests)
	case *nsTop < 1:
		return cfg, fmt.Errorf("--collector.namespaces.top must be at least 1, got %d", *nsTop)
	case *statusStartupPods < 0:
		return cfg, fmt.Errorf("--relist.status.startup-pods must be 0 or more, got %d", *statusStartupPods)
	}
	return cfg, checkTelemetryPath(*metricsPath)
}

// diagnoseConfig is the report's runtime configuration and options, checked.
func diagnoseConfig(logger *slog.Logger) (detect.Config, diagnoseOptions, error) {
	cfg, err := diagnoseRuntime.config(logger)
	if err != nil {
		return cfg, diagnoseOptions{}, err
	}
	if err := diagnoseInspect.apply(&cfg); err != nil {
		return cfg, diagnoseOptions{}, err
	}
	if *diagnoseTop < 1 {
		return cfg, diagnoseOptions{}, fmt.Errorf("--top must be at least 1, got %d", *diagnoseTop)
	}
	return cfg, diagnoseOptions{limitBytes: *diagnoseRuntime.limit, top: *diagnoseTop, output: *outputFmt,
		status: *diagnoseInspect.status, statusTimeout: *diagnoseInspect.timeout}, nil
}
