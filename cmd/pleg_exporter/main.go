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

// Command pleg_exporter warns before a Kubernetes node turns NotReady with
// "PLEG is not healthy": it repeats the kubelet's relist against the
// container runtime in the background and exports what it costs.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unicode"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	promcollectors "github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/pleg-exporter/pleg_exporter/collector"
	"github.com/pleg-exporter/pleg_exporter/pleg"
	"github.com/pleg-exporter/pleg_exporter/runtime/detect"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

const (
	name = "pleg_exporter"
	// defaultAddress is outside 9100-9999, which the Prometheus default
	// port allocations list has fully handed out, and clear of the
	// Kubernetes component ports 10248-10259.
	defaultAddress = ":10391"

	// Deadlines of the metrics server. A scrape is a small GET answered from
	// memory, so these are generous for a real client and short for a
	// client that holds a connection without finishing its request.
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = time.Minute

	// defaultGRPCLimit is the kubelet's gRPC receive limit (16 MiB).
	defaultGRPCLimit = 16 << 20
)

var (
	runtimeKind = kingpin.Flag("runtime", "Runtime API to relist through: auto, cri or docker. auto probes the usual containerd, CRI-O, cri-dockerd and Docker sockets, CRI first.").
			Default(detect.KindAuto).Enum(detect.KindAuto, detect.KindCRI, detect.KindDocker)
	runtimeEndpoint = kingpin.Flag("runtime.endpoint", "Runtime socket as a URL, the kubelet's --container-runtime-endpoint (e.g. unix:///run/containerd/containerd.sock). Empty: auto-detect.").
			Default("").String()
	dockerHost = kingpin.Flag("docker.host", "Docker daemon to read Docker-native states from on cri-dockerd nodes (only Docker shows dead containers). Empty: auto-detect on cri-dockerd nodes; none: off.").
			Default("").String()
	relistInterval = kingpin.Flag("relist.interval", "Pause between the end of one shadow relist and the start of the next (the kubelet relists every 1s; this adds one relist per interval).").
			Default("10s").Duration()
	relistTimeout = kingpin.Flag("relist.timeout", "Deadline of each runtime call, as the kubelet's --runtime-request-timeout.").
			Default("2m").Duration()
	plegThreshold = kingpin.Flag("pleg.threshold", "The kubelet's PLEG threshold, exported as pleg_relist_threshold_seconds (3m, with or without the EventedPLEG gate).").
			Default("3m").Duration()
	grpcLimit = kingpin.Flag("pleg.grpc-limit-bytes", "The kubelet's gRPC receive limit that list answers are compared against.").
			Default(strconv.Itoa(defaultGRPCLimit)).Int64()
	maxRecv = kingpin.Flag("runtime.max-recv-bytes", "The exporter's own receive limit for one runtime answer (a gRPC message, a Docker container list), far above the kubelet's so answers past 16 MiB are still measured.").
		Default("268435456").Int()
	metricsPath = kingpin.Flag("web.telemetry-path", "Path under which to expose metrics.").
			Default("/metrics").String()
	disableExporterMetrics = kingpin.Flag("web.disable-exporter-metrics", "Exclude metrics about the exporter itself (promhttp_*, process_*, go_*).").
				Bool()
	maxRequests = kingpin.Flag("web.max-requests", "Maximum number of parallel scrape requests. Use 0 to disable.").
			Default("40").Int()
	idleTimeout = kingpin.Flag("web.idle-timeout", "How long a keep-alive connection may stay idle between requests before the exporter closes it. Keep it above the scrape interval so scrapes reuse their connection.").
			Default("2m").Duration()
	nsEnabled = kingpin.Flag("collector.namespaces", "Export containers and payload bytes by namespace (pleg_namespace_*), the top --collector.namespaces.top namespaces and the rest as namespace=\"other\".").
			Bool()
	nsTop = kingpin.Flag("collector.namespaces.top", "How many namespaces --collector.namespaces names; the rest are summed as \"other\" (bounds the label's cardinality to N+1).").
		Default("10").Int()
	probeMax = kingpin.Flag("probe.max-per-cycle", "Status calls (PodSandboxStatus, ContainerStatus) on notready sandboxes and unknown containers per relist, oldest first and rotating; 0 disables the probes.").
			Default("20").Int()
	probeTimeout = kingpin.Flag("probe.timeout", "Deadline of each status probe; a probe that reaches it is counted in pleg_status_probe_timeouts_total.").
			Default("5s").Duration()
	statusPass = kingpin.Flag("relist.status", "After the lists, inspect every pod that changed since the previous relist, and every pod whose inspection failed, the way the kubelet's relist does (GetPodStatus: a filtered list and a status call per sandbox and container, one after another, each with --relist.timeout), so pleg_last_seen_seconds grows through a hung status call as the kubelet's does. --no-relist.status turns it off.").
			Default("true").Bool()
	statusStartupPods = kingpin.Flag("relist.status.startup-pods", "Pods already there when the exporter started that one relist inspects besides the changed ones, until all were inspected once, each on --probe.timeout: spreads a fleet-wide rollout's first inspections over minutes. 0: such pods are inspected only when they change.").
				Default("10").Int()
	toolkitFlags = kingpinflag.AddFlags(kingpin.CommandLine, defaultAddress)

	_           = kingpin.Command("serve", "Relist in the background and serve /metrics (the default).").Default()
	diagnoseCmd = kingpin.Command("diagnose", "Relist once and report what threatens the node: counts, payload against the limit, the namespaces and pods that hold the containers, hanging status calls, and the cleanup commands. Exit 0 healthy, 1 at risk, 2 runtime unreachable, 3 the report could not be written.")
	outputFmt   = diagnoseCmd.Flag("output", "Report format: text or json.").Default("text").Enum("text", "json")
)

func main() {
	os.Exit(run())
}

func run() int {
	promslogConfig := &promslog.Config{}
	promslogflag.AddFlags(kingpin.CommandLine, promslogConfig)
	kingpin.CommandLine.Name = name
	kingpin.Version(version.Print(name))
	kingpin.CommandLine.UsageWriter(os.Stdout)
	kingpin.HelpFlag.Short('h')
	command := kingpin.Parse()
	logger := promslog.New(promslogConfig)

	cfg := detect.Config{
		Kind:         *runtimeKind,
		Endpoint:     *runtimeEndpoint,
		DockerHost:   *dockerHost,
		MaxRecvBytes: *maxRecv,
		Timeout:      *relistTimeout,
		Logger:       logger,
		ProbeMax:     *probeMax,
		ProbeTimeout: *probeTimeout,
		LimitBytes:   *grpcLimit,
	}
	if *nsEnabled {
		cfg.NamespacesTop = *nsTop
	}
	if err := checkFlags(cfg); err != nil {
		fmt.Fprintf(os.Stderr, "%s: error: %v\n", name, err)
		return 1
	}
	switch command {
	case diagnoseCmd.FullCommand():
		return runDiagnose(cfg, diagnoseOptions{limitBytes: *grpcLimit, top: *nsTop, output: *outputFmt,
			status: *statusPass, statusTimeout: *probeTimeout})
	case gcCmd.FullCommand():
		o, err := gcFlags(cfg, *grpcLimit)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: error: %v\n", name, err)
			return 1
		}
		return runGC(cfg, o, os.Stdout, os.Stderr)
	}
	if f := *toolkitFlags.WebConfigFile; f != "" {
		if err := web.Validate(f); err != nil {
			fmt.Fprintf(os.Stderr, "%s: error: --web.config.file=%s: %v\n", name, f, err)
			return 1
		}
	}

	logger.Info("Starting "+name, "version", version.Info())
	logger.Info("Build context", "build_context", version.BuildContext())

	rt, err := detect.Open(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: error: %v\n", name, err)
		return 1
	}
	defer rt.Close()

	_, inspects := rt.(kubecontainer.PodInspector)
	status := *statusPass && inspects
	metrics := collector.New(collector.Config{Threshold: *plegThreshold, LimitBytes: *grpcLimit, Probes: *probeMax > 0, Status: status})
	relister := pleg.NewRelister(rt, pleg.Config{
		Interval:          *relistInterval,
		LimitBytes:        *grpcLimit,
		Probes:            *probeMax > 0,
		Status:            status,
		StatusStartupPods: *statusStartupPods,
		// Not a deadline of the kubelet's: a pod unchanged since start-up
		// may be one it never inspects (status.go).
		StatusStartupTimeout: *probeTimeout,
		StatusMaxDuration:    *plegThreshold,
		TuneMemory:           true,
	}, metrics, logger)
	if *statusPass && !inspects {
		logger.Warn("this runtime cannot inspect pods; the status pass is off", "runtime", cfg.Kind)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go relister.Run(ctx)

	mux := http.NewServeMux()
	mux.Handle(*metricsPath, newHandler(metrics, !*disableExporterMetrics, *maxRequests, logger))
	mux.Handle("/-/healthy", healthHandler(cfg.Sockets(), logger))
	mux.HandleFunc("/-/ready", func(w http.ResponseWriter, _ *http.Request) {
		select {
		case <-relister.FirstRelistDone():
			fmt.Fprintln(w, "Ready.")
		default:
			http.Error(w, "First relist has not finished yet.", http.StatusServiceUnavailable)
		}
	})
	if *metricsPath != "/" {
		landing, err := web.NewLandingPage(web.LandingConfig{
			Name:        "PLEG Exporter",
			Description: "Shadow PLEG relist: warns before the kubelet's 'PLEG is not healthy'",
			Version:     version.Info(),
			Links: []web.LandingLinks{
				{Address: *metricsPath, Text: "Metrics"},
				{Address: "/-/healthy", Text: "Health"},
				{Address: "/-/ready", Text: "Readiness"},
			},
		})
		if err != nil {
			logger.Error("landing page", "err", err)
			return 1
		}
		mux.Handle("/", landing)
	}

	server := &http.Server{
		Handler: mux,
		// Every phase of a connection has a deadline, so no client can hold
		// goroutines and file descriptors open: a silent or slow client is
		// cut off while it sends its request, an idle keep-alive connection
		// after --web.idle-timeout.
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       *idleTimeout,
	}
	errc := make(chan error, 1)
	go func() { errc <- web.ListenAndServe(server, toolkitFlags, logger) }()
	select {
	case err := <-errc:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("web server failed", "err", err)
			return 1
		}
	case <-ctx.Done():
		logger.Info("Received signal, shutting down gracefully")
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := server.Shutdown(sctx); err != nil {
			logger.Error("shutdown", "err", err)
			return 1
		}
	}
	return 0
}

func checkFlags(cfg detect.Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	switch {
	case *relistInterval <= 0:
		return fmt.Errorf("--relist.interval must be positive, got %s", *relistInterval)
	case *plegThreshold <= 0:
		return fmt.Errorf("--pleg.threshold must be positive, got %s", *plegThreshold)
	case *grpcLimit <= 0:
		return fmt.Errorf("--pleg.grpc-limit-bytes must be positive, got %d", *grpcLimit)
	case int64(*maxRecv) <= *grpcLimit:
		return fmt.Errorf("--runtime.max-recv-bytes (%d) must be above --pleg.grpc-limit-bytes (%d) to measure answers past the kubelet's limit", *maxRecv, *grpcLimit)
	case *idleTimeout <= 0:
		return fmt.Errorf("--web.idle-timeout must be positive, got %s", *idleTimeout)
	case *maxRequests < 0:
		return fmt.Errorf("--web.max-requests must be 0 or more, got %d", *maxRequests)
	case *nsTop < 1:
		return fmt.Errorf("--collector.namespaces.top must be at least 1, got %d", *nsTop)
	case *probeMax < 0:
		return fmt.Errorf("--probe.max-per-cycle must be 0 or more, got %d", *probeMax)
	case *probeTimeout <= 0:
		return fmt.Errorf("--probe.timeout must be positive, got %s", *probeTimeout)
	case *statusStartupPods < 0:
		return fmt.Errorf("--relist.status.startup-pods must be 0 or more, got %d", *statusStartupPods)
	}
	return checkTelemetryPath(*metricsPath)
}

// checkTelemetryPath refuses a metrics path that http.ServeMux would panic
// on (empty, relative, a pattern it cannot parse) or that would shadow the
// health and readiness endpoints the probes depend on.
func checkTelemetryPath(p string) (err error) {
	switch {
	case !strings.HasPrefix(p, "/"):
		return fmt.Errorf("--web.telemetry-path must be an absolute path such as /metrics, got %q", p)
	case p == "/-/" || strings.HasPrefix(p, "/-/"):
		return fmt.Errorf("--web.telemetry-path %q is reserved for the exporter's own endpoints (/-/healthy, /-/ready)", p)
	case strings.ContainsFunc(p, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }):
		return fmt.Errorf("--web.telemetry-path %q must not contain spaces or control characters", p)
	}
	// ServeMux reports a pattern it cannot parse ("/{") or one that
	// conflicts with the other routes ("/{a...}" with the landing page's
	// "/") by panicking; ask it on a throwaway mux with the same routes.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("--web.telemetry-path %q is not a usable path: %s", p, strings.Join(strings.Fields(fmt.Sprint(r)), " "))
		}
	}()
	mux := http.NewServeMux()
	for _, route := range []string{"/-/healthy", "/-/ready", "/"} {
		if route != p {
			mux.Handle(route, http.NotFoundHandler())
		}
	}
	mux.Handle(p, http.NotFoundHandler())
	return nil
}

// healthHandler answers the liveness probe. The one failure a restart of the
// exporter cures is a stale runtime socket: a socket file bind-mounted into
// the pod keeps pointing at the inode the runtime deleted when it restarted,
// and the exporter stays blind until the pod gets a fresh mount.
func healthHandler(sockets []string, logger *slog.Logger) http.Handler {
	var logged atomic.Bool
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if err := detect.StaleSocket(sockets...); err != nil {
			if !logged.Swap(true) {
				logger.Error("Unhealthy", "err", err)
			}
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "Healthy.")
	})
}

// newHandler serves the product's metrics and, unless disabled, the
// exporter's own, as node_exporter does.
func newHandler(metrics *collector.Collector, exporterMetrics bool, maxRequests int, logger *slog.Logger) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(versioncollector.NewCollector(name), metrics)
	self := prometheus.NewRegistry()
	gatherers := prometheus.Gatherers{reg}
	if exporterMetrics {
		self.MustRegister(
			promcollectors.NewProcessCollector(promcollectors.ProcessCollectorOpts{}),
			promcollectors.NewGoCollector(),
		)
		gatherers = prometheus.Gatherers{self, reg}
	}
	h := promhttp.HandlerFor(gatherers, promhttp.HandlerOpts{
		ErrorLog:            slog.NewLogLogger(logger.Handler(), slog.LevelError),
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: maxRequests,
		Registry:            self,
	})
	if exporterMetrics {
		h = promhttp.InstrumentMetricHandler(self, h)
	}
	return h
}
