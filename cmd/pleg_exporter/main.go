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
	defaultGRPCLimit = kubecontainer.GRPCLimitBytes
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
	fail := func(code int, err error) int {
		fmt.Fprintf(os.Stderr, "%s: error: %v\n", name, err)
		return code
	}

	switch command {
	case diagnoseCmd.FullCommand():
		cfg, opts, err := diagnoseConfig(logger)
		if err != nil {
			return fail(1, err)
		}
		return runDiagnose(cfg, opts)
	case gcCmd.FullCommand():
		cfg, opts, err := gcConfig(logger)
		if err != nil {
			return fail(1, err)
		}
		return runGC(cfg, opts, os.Stdout, os.Stderr)
	}
	cfg, err := serveConfig(logger)
	if err != nil {
		return fail(1, err)
	}
	if f := *toolkitFlags.WebConfigFile; f != "" {
		if err := web.Validate(f); err != nil {
			return fail(1, fmt.Errorf("--web.config.file=%s: %v", f, err))
		}
	}
	return serve(cfg, logger)
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

// serve runs the exporter: the relist loop in the background and the
// metrics server, until SIGTERM or SIGINT.
func serve(cfg detect.Config, logger *slog.Logger) int {
	logger.Info("Starting "+name, "version", version.Info())
	logger.Info("Build context", "build_context", version.BuildContext())

	rt, err := detect.Open(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: error: %v\n", name, err)
		return 1
	}
	defer rt.Close()

	_, inspects := rt.(kubecontainer.PodInspector)
	status := *serveInspect.status && inspects
	metrics := collector.New(collector.Config{Threshold: *plegThreshold, LimitBytes: cfg.LimitBytes, Probes: cfg.ProbeMax > 0, Status: status})
	relister := pleg.NewRelister(rt, pleg.Config{
		Interval:          *relistInterval,
		LimitBytes:        cfg.LimitBytes,
		Probes:            cfg.ProbeMax > 0,
		Status:            status,
		StatusStartupPods: *statusStartupPods,
		// Not a deadline of the kubelet's: a pod unchanged since start-up
		// may be one it never inspects (status.go).
		StatusStartupTimeout: cfg.ProbeTimeout,
		StatusMaxDuration:    *plegThreshold,
		TuneMemory:           true,
	}, metrics, logger)
	if *serveInspect.status && !inspects {
		logger.Warn("this runtime cannot inspect pods; the status pass is off", "runtime", cfg.Kind)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go relister.Run(ctx)

	mux, err := newMux(metrics, relister.FirstRelistDone(), cfg.Sockets(), logger)
	if err != nil {
		logger.Error("landing page", "err", err)
		return 1
	}
	return listen(ctx, mux, logger)
}

// newMux routes the metrics, the probes' endpoints and the landing page.
func newMux(metrics *collector.Collector, ready <-chan struct{}, sockets []string, logger *slog.Logger) (*http.ServeMux, error) {
	mux := http.NewServeMux()
	mux.Handle(*metricsPath, newHandler(metrics, !*disableExporterMetrics, *maxRequests, logger))
	mux.Handle("/-/healthy", healthHandler(sockets, logger))
	mux.HandleFunc("/-/ready", func(w http.ResponseWriter, _ *http.Request) {
		select {
		case <-ready:
			fmt.Fprintln(w, "Ready.")
		default:
			http.Error(w, "First relist has not finished yet.", http.StatusServiceUnavailable)
		}
	})
	if *metricsPath == "/" {
		return mux, nil
	}
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
		return nil, err
	}
	mux.Handle("/", landing)
	return mux, nil
}

// listen serves mux on the toolkit's addresses until ctx ends, then shuts
// the server down gracefully.
func listen(ctx context.Context, mux http.Handler, logger *slog.Logger) int {
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
