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

// Package collector is the Prometheus collector of pleg_exporter: it owns
// every descriptor and instrument of the metric contract and turns the shadow
// relister's state (package pleg) into metrics at scrape time. It keeps the
// latest state the relister reported, as kube-state-metrics keeps its store:
// a scrape reads memory only and never calls the container runtime.
package collector

import (
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pleg-exporter/pleg_exporter/pleg"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// LatencyBuckets reach past the kubelet's 180 s threshold so a relist that
// hangs until its deadline lands in a finite bucket, unlike the kubelet's own
// histogram whose largest finite bucket is 10 s.
var LatencyBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 180, 300}

// probeBuckets span a status call from a healthy millisecond to the
// --probe.timeout range.
var probeBuckets = []float64{.001, .005, .01, .05, .1, .5, 1, 2.5, 5, 10, 30}

var (
	containersDesc = prometheus.NewDesc("pleg_containers",
		"Containers by CRI state (created, running, exited, unknown) in the latest relist that returned counts; exited and unknown containers are what fills the kubelet's ListContainers answer.",
		[]string{"state"}, nil)
	dockerContainersDesc = prometheus.NewDesc("pleg_docker_containers",
		"Containers by Docker's own state in the latest relist; only Docker shows dead containers, which cri-dockerd reports to the kubelet as unknown.",
		[]string{"state"}, nil)
	dockerUpDesc = prometheus.NewDesc("pleg_docker_up",
		"1 if the Docker daemon answered the latest relist's container list, 0 otherwise. Present only when a Docker view is configured.",
		nil, nil)
	sandboxesDesc = prometheus.NewDesc("pleg_sandboxes",
		"Pod sandboxes by CRI state (ready, notready) in the latest relist that returned counts.",
		[]string{"state"}, nil)
	durationDesc = prometheus.NewDesc("pleg_relist_last_duration_seconds",
		"Wall time of the latest finished shadow relist: the unfiltered ListPodSandbox and ListContainers calls the kubelet makes every second.",
		nil, nil)
	rpcDurationDesc = prometheus.NewDesc("pleg_relist_rpc_last_duration_seconds",
		"Wall time of each unfiltered list call of the latest finished relist.",
		[]string{"rpc"}, nil)
	payloadDesc = prometheus.NewDesc("pleg_relist_payload_bytes",
		"Serialized size of each unfiltered list answer of the latest relist, the bytes the kubelet must receive: exact for CRI, taken from the runtime's error when it refused to send, estimated for Docker.",
		[]string{"rpc"}, nil)
	payloadLimitDesc = prometheus.NewDesc("pleg_relist_payload_limit_bytes",
		"The kubelet's gRPC receive limit the payload is compared against; past it every kubelet relist and container GC fails.",
		nil, nil)
	lastSeenDesc = prometheus.NewDesc("pleg_last_seen_seconds",
		"Seconds since the start of the latest relist the kubelet would have accepted (the kubelet's 'pleg was last seen active … ago'), computed at scrape time; relists run in the background, so this keeps growing while the runtime hangs. Counts from exporter start-up until the first success.",
		nil, nil)
	streamLastSeenDesc = prometheus.NewDesc("pleg_streaming_last_seen_seconds",
		"pleg_last_seen_seconds for a kubelet with the CRIListStreaming gate: seconds since the start of the latest relist it would have accepted, which includes relists whose whole answer passes the payload limit while every streamed message fits. Only for runtimes that stream.",
		nil, nil)
	thresholdDesc = prometheus.NewDesc("pleg_relist_threshold_seconds",
		"The kubelet's PLEG threshold: when pleg_last_seen_seconds passes it the node turns NotReady.",
		nil, nil)
	upDesc = prometheus.NewDesc("pleg_runtime_up",
		"1 if the container runtime answered the latest relist with exact counts (possibly through the fallback lists), 0 if it was unreachable, failed or timed out.",
		nil, nil)
	fallbackDesc = prometheus.NewDesc("pleg_relist_fallback",
		"1 if the latest relist's counts came from filtered or streamed lists because an unfiltered list failed (the kubelet is blind at this moment), 0 otherwise.",
		nil, nil)
	fallbackDurationDesc = prometheus.NewDesc("pleg_relist_fallback_last_duration_seconds",
		"Wall time of the fallback lists of the latest relist; 0 when none were needed.",
		nil, nil)
	relistsDesc = prometheus.NewDesc("pleg_relists_total",
		"Shadow relists attempted.",
		nil, nil)
	errorsDesc = prometheus.NewDesc("pleg_relist_errors_total",
		"Shadow relists that the kubelet's relist would have failed, by gRPC code (ResourceExhausted: an answer over the payload limit; DeadlineExceeded: the runtime hung; Unavailable: not reachable).",
		[]string{"code"}, nil)
	nsContainersDesc = prometheus.NewDesc("pleg_namespace_containers",
		"Containers by namespace and CRI state in the latest relist, the top --collector.namespaces.top namespaces by container count and the rest summed as namespace=\"other\" (opt-in: --collector.namespaces).",
		[]string{"namespace", "state"}, nil)
	nsPayloadDesc = prometheus.NewDesc("pleg_namespace_payload_bytes",
		"Bytes each namespace's containers add to the ListContainers answer, same namespaces as pleg_namespace_containers (opt-in: --collector.namespaces).",
		[]string{"namespace"}, nil)
	streamMessageDesc = prometheus.NewDesc("pleg_relist_stream_message_max_bytes",
		"Largest message of each list streamed (CRI list streaming: StreamPodSandboxes, StreamContainers), the most a kubelet with the CRIListStreaming gate receives at once: measured from the stream when the whole answer passes the payload limit, else the whole answer's size, which no message exceeds. Only for runtimes that stream.",
		[]string{"rpc"}, nil)
	statusLastDurationDesc = prometheus.NewDesc("pleg_relist_status_last_duration_seconds",
		"Wall time of the latest finished status pass: the kubelet's GetPodStatus of every pod that changed or failed before (a filtered list and a status call per sandbox and container), one pod after another, after the lists and before the next relist. 0 when no pod was inspected.",
		nil, nil)
	statusPodsDesc = prometheus.NewDesc("pleg_relist_status_pods",
		"Pods inspected in the latest finished status pass.",
		nil, nil)
	statusCallsDesc = prometheus.NewDesc("pleg_relist_status_calls",
		"Runtime calls of the latest finished status pass, by RPC.",
		[]string{"rpc"}, nil)
	statusCallsTotalDesc = prometheus.NewDesc("pleg_relist_status_calls_total",
		"Runtime calls of the status passes, by RPC: at most the kubelet's own for the same pods (it inspects a changed pod once per change, the exporter once per interval).",
		[]string{"rpc"}, nil)
	statusFailuresDesc = prometheus.NewDesc("pleg_relist_status_failures_total",
		"Pod inspections that failed, by gRPC code of the call that failed (DeadlineExceeded: a status call hung for --relist.timeout, as the kubelet's does for its --runtime-request-timeout).",
		[]string{"code"}, nil)
	reinspectDesc = prometheus.NewDesc("pleg_relist_reinspect_pods",
		"Pods whose latest inspection failed; like the kubelet (podsToReinspect), the next relist inspects them again, and each hung call costs every relist its deadline.",
		nil, nil)
	listInFlightDesc = prometheus.NewDesc("pleg_relist_list_in_flight_seconds",
		"Age of the relist's list calls under way now (ListPodSandbox, then ListContainers, each with --relist.timeout), computed at scrape time; 0 between relists. It climbs from the first second of a runtime that stops answering: a kubelet whose calls hang so marks the node NotReady (\"container runtime is down\") when its node status call reaches its --runtime-request-timeout, before the PLEG threshold.",
		nil, nil)
	inFlightDesc = prometheus.NewDesc("pleg_relist_status_in_flight_seconds",
		"Age of the status call under way now, by RPC (0 for the others), computed at scrape time: a call that hangs climbs towards --relist.timeout while pleg_last_seen_seconds grows with it.",
		[]string{"rpc"}, nil)
	pendingDesc = prometheus.NewDesc("pleg_relist_status_pending_pods",
		"Pods that were already there when the exporter started and are not inspected yet (--relist.status.startup-pods a relist), and pods a pass cut short at the threshold did not reach.",
		nil, nil)
	infoDesc = prometheus.NewDesc("pleg_runtime_info",
		"The container runtime the exporter relists through; streaming says whether it implements CRI list streaming (true, false, or unknown).",
		[]string{"runtime", "version", "api_version", "streaming"}, nil)
)

// Config is what the collector exports besides the relister's state.
type Config struct {
	// Threshold is the kubelet's PLEG threshold (3m), exported so alerts
	// can compare pleg_last_seen_seconds against it.
	Threshold time.Duration
	// LimitBytes is the kubelet's gRPC receive limit (16 MiB).
	LimitBytes int64
	// Probes exports the status probe metrics.
	Probes bool
	// Status exports the status pass metrics.
	Status bool
	// Now is the clock pleg_last_seen_seconds is computed with; nil means
	// time.Now.
	Now func() time.Time
}

// Collector exports the relister's state. It implements pleg.Observer: the
// relister tells it each relist and probe, Collect reads memory only.
type Collector struct {
	cfg Config

	latency       prometheus.Histogram
	changedItems  prometheus.Counter
	changedPods   prometheus.Counter
	probeLatency  *prometheus.HistogramVec
	probeTimeouts *prometheus.CounterVec
	passLatency   prometheus.Histogram

	mu    sync.RWMutex
	state pleg.State
	// churn is set once a relist compared its items with the previous one
	// (CRI runtimes): the change counters are exported from then on.
	churn bool
}

// New returns the collector; pass it to pleg.NewRelister as its Observer.
func New(cfg Config) *Collector {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Collector{
		cfg: cfg,
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pleg_relist_duration_seconds",
			Help:    "Distribution of shadow relist durations (both unfiltered list calls), failed relists included, as the kubelet's kubelet_pleg_relist_duration_seconds but with buckets past the 180 s threshold.",
			Buckets: LatencyBuckets,
		}),
		changedItems: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pleg_relist_changed_containers_total",
			Help: "Containers and sandboxes that appeared, went or changed state between two consecutive complete shadow relists: the events the kubelet's PLEG generates.",
		}),
		changedPods: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pleg_relist_changed_pods_total",
			Help: "Pods with at least one changed container or sandbox between two consecutive complete shadow relists; the kubelet's relist calls GetPodStatus (a status call per container) for each such pod.",
		}),
		probeLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pleg_status_probe_duration_seconds",
			Help:    "Latency of the exporter's status calls (PodSandboxStatus, ContainerStatus) on notready sandboxes and unknown containers, the per-pod calls that hang on broken sandboxes and make one kubelet relist take minutes.",
			Buckets: probeBuckets,
		}, []string{"kind"}),
		passLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pleg_relist_status_duration_seconds",
			Help:    "Distribution of status pass durations, one per relist whose lists the kubelet would have accepted (0 when no pod changed): added to the lists' time, what the kubelet's kubelet_pleg_relist_duration_seconds measures.",
			Buckets: LatencyBuckets,
		}),
		probeTimeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pleg_status_probe_timeouts_total",
			Help: "Status probes that ran into their deadline (--probe.timeout): each such call costs the kubelet's relist up to its 2m runtime-request-timeout.",
		}, []string{"kind"}),
	}
}

// Observe implements pleg.Observer: it keeps the state for the next scrape
// and records the duration of each relist it has not seen yet (the relister
// also reports states between relists, e.g. once it learnt who the runtime
// is while a relist hangs).
func (c *Collector) Observe(st pleg.State) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.Last != nil && st.Relists != c.state.Relists {
		c.latency.Observe(st.Last.Duration.Seconds())
		if st.Last.ChangesKnown {
			c.churn = true
			c.changedItems.Add(float64(st.Last.ChangedItems))
			c.changedPods.Add(float64(st.Last.ChangedPods))
		}
	}
	if st.Status.Passes != c.state.Status.Passes {
		c.passLatency.Observe(st.Status.Last.Duration.Seconds())
	}
	c.state = st
}

// ObserveProbe implements pleg.Observer.
func (c *Collector) ObserveProbe(res kubecontainer.ProbeResult) {
	c.probeLatency.WithLabelValues(res.Kind).Observe(res.Duration.Seconds())
	if res.TimedOut {
		c.probeTimeouts.WithLabelValues(res.Kind).Inc()
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{containersDesc, dockerContainersDesc, dockerUpDesc, sandboxesDesc,
		durationDesc, rpcDurationDesc, payloadDesc, payloadLimitDesc, lastSeenDesc, listInFlightDesc, thresholdDesc, upDesc,
		fallbackDesc, fallbackDurationDesc, relistsDesc, errorsDesc, infoDesc, nsContainersDesc, nsPayloadDesc,
		streamMessageDesc, streamLastSeenDesc} {
		ch <- d
	}
	c.latency.Describe(ch)
	c.changedItems.Describe(ch)
	c.changedPods.Describe(ch)
	if c.cfg.Probes {
		c.probeLatency.Describe(ch)
		c.probeTimeouts.Describe(ch)
	}
	if c.cfg.Status {
		for _, d := range []*prometheus.Desc{statusLastDurationDesc, statusPodsDesc, statusCallsDesc, statusCallsTotalDesc,
			statusFailuresDesc, reinspectDesc, inFlightDesc, pendingDesc} {
			ch <- d
		}
		c.passLatency.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.RLock()
	st, churn := c.state, c.churn
	c.mu.RUnlock()
	gauge := gaugeFunc(func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	})

	gauge(lastSeenDesc, c.cfg.Now().Sub(st.LastSeen).Seconds())
	listing := 0.0
	if !st.ListingSince.IsZero() {
		listing = max(c.cfg.Now().Sub(st.ListingSince).Seconds(), 0)
	}
	gauge(listInFlightDesc, listing)
	gauge(thresholdDesc, c.cfg.Threshold.Seconds())
	gauge(payloadLimitDesc, float64(c.cfg.LimitBytes))
	ch <- prometheus.MustNewConstMetric(relistsDesc, prometheus.CounterValue, float64(st.Relists))
	for code, n := range st.Errors {
		ch <- prometheus.MustNewConstMetric(errorsDesc, prometheus.CounterValue, float64(n), code)
	}
	c.latency.Collect(ch)
	if churn {
		c.changedItems.Collect(ch)
		c.changedPods.Collect(ch)
	}
	if c.cfg.Probes {
		c.probeLatency.Collect(ch)
		c.probeTimeouts.Collect(ch)
	}
	if c.cfg.Status {
		c.collectStatus(ch, st.Status)
	}
	if st.InfoKnown {
		streaming := st.Info.Streaming
		if streaming == "" {
			streaming = "unknown"
		}
		gauge(infoDesc, 1, st.Info.Runtime, st.Info.Version, st.Info.APIVersion, streaming)
		if streaming == "true" {
			gauge(streamLastSeenDesc, c.cfg.Now().Sub(st.StreamLastSeen).Seconds())
		}
	}

	c.collectRelist(gauge, st.Last)
	c.collectCounts(gauge, st.Counted)
}

// collectRelist exports the latest relist: up, fallback, durations, payload
// and stream sizes, and Docker's view.
func (c *Collector) collectRelist(gauge gaugeFunc, last *kubecontainer.Snapshot) {
	up, fallback, fallbackDur := 0.0, 0.0, 0.0
	if last != nil {
		if last.Counted {
			up = 1
		}
		if last.Fallback {
			fallback = 1
		}
		fallbackDur = last.FallbackDuration.Seconds()
		gauge(durationDesc, last.Duration.Seconds())
		for _, rpc := range []string{kubecontainer.RPCListPodSandbox, kubecontainer.RPCListContainers} {
			s, ok := last.RPCs[rpc]
			if !ok {
				continue
			}
			gauge(rpcDurationDesc, s.Duration.Seconds(), rpc)
			if s.PayloadKnown {
				gauge(payloadDesc, float64(s.PayloadBytes), rpc)
			}
			if s.StreamKnown {
				gauge(streamMessageDesc, float64(s.StreamMessageBytes), rpc)
			}
		}
		if last.DockerContainers != nil || last.DockerErr != nil {
			dockerUp := 1.0
			if last.DockerErr != nil {
				dockerUp = 0
			}
			gauge(dockerUpDesc, dockerUp)
			for _, s := range kubecontainer.DockerStates {
				if last.DockerContainers != nil {
					gauge(dockerContainersDesc, float64(last.DockerContainers[s]), s)
				}
			}
		}
	}
	gauge(upDesc, up)
	gauge(fallbackDesc, fallback)
	gauge(fallbackDurationDesc, fallbackDur)
}

// collectCounts exports the counts. They stay at the last exact answer
// while the runtime is unreachable, the way the kubelet's view freezes;
// pleg_runtime_up tells them apart.
func (c *Collector) collectCounts(gauge gaugeFunc, cnt *kubecontainer.Snapshot) {
	if cnt == nil {
		return
	}
	for _, s := range kubecontainer.ContainerStates {
		gauge(containersDesc, float64(cnt.Containers[s]), s)
	}
	for _, s := range kubecontainer.SandboxStates {
		gauge(sandboxesDesc, float64(cnt.Sandboxes[s]), s)
	}
	for _, ns := range namespaceSeries(cnt.Namespaces) {
		for _, s := range kubecontainer.ContainerStates {
			gauge(nsContainersDesc, float64(ns.Containers[s]), ns.Namespace, s)
		}
		gauge(nsPayloadDesc, float64(ns.PayloadBytes), ns.Namespace)
	}
}

// gaugeFunc sends one gauge sample.
type gaugeFunc func(d *prometheus.Desc, v float64, lv ...string)

// namespaceSeries returns the namespaces with label values that are UTF-8
// and each used once, summing the ones that share a value. The runtime layer
// already exports them so (kubecontainer.NamespaceLabel); this holds for any
// snapshot, because one label value that is not UTF-8 fails the scrape of
// every namespace series after it, and one repeated fails the scrape.
func namespaceSeries(stats []kubecontainer.NamespaceStat) []kubecontainer.NamespaceStat {
	out := make([]kubecontainer.NamespaceStat, 0, len(stats))
	at := make(map[string]int, len(stats))
	for _, ns := range stats {
		label := ns.Namespace
		if !utf8.ValidString(label) {
			label = strings.ToValidUTF8(label, "\uFFFD")
		}
		i, ok := at[label]
		if !ok {
			at[label] = len(out)
			out = append(out, kubecontainer.NamespaceStat{Namespace: label, Containers: map[string]int{}})
			i = len(out) - 1
		}
		for k, v := range ns.Containers {
			out[i].Containers[k] += v
		}
		out[i].PayloadBytes += ns.PayloadBytes
	}
	return out
}

// collectStatus exports the status passes. Every RPC has its series from
// the start, so a rate or an alert sees the first call.
func (c *Collector) collectStatus(ch chan<- prometheus.Metric, st pleg.StatusState) {
	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	gauge(statusLastDurationDesc, st.Last.Duration.Seconds())
	gauge(statusPodsDesc, float64(st.Last.Pods))
	gauge(reinspectDesc, float64(len(st.Reinspect)))
	gauge(pendingDesc, float64(st.Pending))
	now := c.cfg.Now()
	for _, rpc := range kubecontainer.StatusRPCs {
		gauge(statusCallsDesc, float64(st.Last.Calls[rpc]), rpc)
		ch <- prometheus.MustNewConstMetric(statusCallsTotalDesc, prometheus.CounterValue, float64(st.Calls[rpc]), rpc)
		age := 0.0
		if f := st.InFlight; f != nil && f.RPC == rpc {
			age = max(now.Sub(f.Since).Seconds(), 0)
		}
		gauge(inFlightDesc, age, rpc)
	}
	for code, n := range st.Failures {
		ch <- prometheus.MustNewConstMetric(statusFailuresDesc, prometheus.CounterValue, float64(n), code)
	}
	c.passLatency.Collect(ch)
}
