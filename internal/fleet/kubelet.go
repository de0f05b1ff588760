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
	"math"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// The kubelet's series the mixin reads, with the kubelet's names, help,
// labels and buckets (pkg/kubelet/metrics, component-base): a kubelet
// relists every second, each relist as long as the node's recorded one;
// past the limit every relist fails at once, with a frozen runtime each
// waits its 2m deadline. A real kubelet exports many more series; they are
// not the exporter's and not counted against it.
var (
	kubeletBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

	kubeletDurationDesc = prometheus.NewDesc("kubelet_pleg_relist_duration_seconds",
		"[ALPHA] Duration in seconds for relisting pods in PLEG.", nil, nil)
	kubeletIntervalDesc = prometheus.NewDesc("kubelet_pleg_relist_interval_seconds",
		"[ALPHA] Interval in seconds between relisting in PLEG.", nil, nil)
	kubeletLastSeenDesc = prometheus.NewDesc("kubelet_pleg_last_seen_seconds",
		"[ALPHA] Timestamp in seconds when PLEG was last seen active.", nil, nil)
	kubeletDiscardDesc = prometheus.NewDesc("kubelet_pleg_discard_events",
		"[ALPHA] The number of discard events in PLEG.", nil, nil)
	kubeletContainersDesc = prometheus.NewDesc("kubelet_running_containers",
		"[ALPHA] Number of containers currently running", []string{"container_state"}, nil)
	kubeletPodsDesc = prometheus.NewDesc("kubelet_running_pods",
		"[ALPHA] Number of pods that have a running pod sandbox", nil, nil)
	kubeletStartDesc = prometheus.NewDesc("process_start_time_seconds",
		"[ALPHA] Start time of the process since unix epoch in seconds.", nil, nil)
	kubeletBuildDesc = prometheus.NewDesc("kubernetes_build_info",
		"[ALPHA] A metric with a constant '1' value labeled by major, minor, git version, git commit, git tree state, build date, Go version, and compiler from which Kubernetes was built, and platform on which it is running.",
		[]string{"build_date", "compiler", "git_commit", "git_tree_state", "git_version", "go_version", "major", "minor", "platform"}, nil)
	kubeletGateDesc = prometheus.NewDesc("kubernetes_feature_enabled",
		"[BETA] This metric records the data about the stage and enablement of a k8s feature.", []string{"name", "stage"}, nil)
)

// KubeletVersions are dealt to the nodes in turn: a fleet mid-upgrade.
var KubeletVersions = []string{"v1.34.4", "v1.35.4", "v1.36.3", "v1.37.2"}

// kubeletRelistTimeout is the kubelet's --runtime-request-timeout.
const kubeletRelistTimeout = 2 * time.Minute

type kubelet struct{ node *Node }

func (k *kubelet) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{kubeletDurationDesc, kubeletIntervalDesc, kubeletLastSeenDesc, kubeletDiscardDesc,
		kubeletContainersDesc, kubeletPodsDesc, kubeletStartDesc, kubeletBuildDesc, kubeletGateDesc} {
		ch <- d
	}
}

func (k *kubelet) Collect(ch chan<- prometheus.Metric) {
	n := k.node
	now := n.sim.clock.Now()
	started, _ := n.kubeletStart(now)
	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	v := KubeletVersions[n.index%len(KubeletVersions)]
	minor := strings.Split(v, ".")[1]
	gauge(kubeletBuildDesc, 1, "2026-11-20T00:00:00Z", "gc", "0000000000000000000000000000000000000000", "clean", v, "go1.25.9",
		"1", minor, "linux/amd64")
	gauge(kubeletGateDesc, 0, "EventedPLEG", "ALPHA")
	if minor >= "36" {
		gauge(kubeletGateDesc, 0, "CRIListStreaming", "ALPHA")
	}
	gauge(kubeletStartDesc, float64(started.Unix()))
	ch <- prometheus.MustNewConstMetric(kubeletDiscardDesc, prometheus.CounterValue, 0)

	// The kubelet's relists since it started: every second while the
	// runtime answers, each taking the recorded duration; past the fault,
	// fails at once (overflow) or waits its deadline (frozen).
	good := n.phase(started)
	d := good.Steady.Duration.Seconds()
	fault := n.sim.start.Add(n.sim.cfg.FaultAfter)
	healthyUntil := now
	if (n.Life == Overflowing || n.Life == Frozen) && now.After(fault) {
		healthyUntil = fault
	}
	relists := uint64(max(healthyUntil.Sub(started).Seconds(), 0) / (1 + d))
	durations, intervals := map[float64]uint64{}, map[float64]uint64{}
	sumD, sumI := float64(relists)*d, float64(relists)*(1+d)
	add(durations, d, relists)
	add(intervals, 1+d, relists)
	if healthyUntil != now {
		after := now.Sub(fault).Seconds()
		per, dur := 1.0+0.05, 0.05 // a refused answer comes back in milliseconds
		if n.Life == Frozen {
			per, dur = kubeletRelistTimeout.Seconds()+1, kubeletRelistTimeout.Seconds()
		}
		failed := uint64(after / per)
		add(durations, dur, failed)
		add(intervals, per, failed)
		relists += failed
		sumD += float64(failed) * dur
		sumI += float64(failed) * per
	}
	ch <- prometheus.MustNewConstHistogram(kubeletDurationDesc, relists, sumD, durations)
	ch <- prometheus.MustNewConstHistogram(kubeletIntervalDesc, relists, sumI, intervals)
	lastSeen := healthyUntil.Add(-time.Duration(math.Mod(float64(healthyUntil.Sub(started)), float64(time.Second))))
	gauge(kubeletLastSeenDesc, float64(lastSeen.Unix()))

	// The kubelet's counts are those of its last relist that succeeded.
	counted := n.phase(healthyUntil.Add(-time.Second)).Steady
	for _, st := range kubecontainer.ContainerStates {
		gauge(kubeletContainersDesc, float64(counted.Containers[st]), st)
	}
	gauge(kubeletPodsDesc, float64(counted.Sandboxes[kubecontainer.SandboxReady]))
}

// add puts n observations of v into the cumulative buckets.
func add(buckets map[float64]uint64, v float64, n uint64) {
	for _, b := range kubeletBuckets {
		if v <= b {
			buckets[b] += n
		}
	}
	for _, b := range kubeletBuckets {
		if _, ok := buckets[b]; !ok {
			buckets[b] = 0
		}
	}
}
