{
  _config+:: {
    // Selects the exporter's series. Override to match your scrape config.
    plegExporterSelector: 'job="pleg-exporter"',
    // Selects the kubelet's own /metrics (kubelet_pleg_*); set to '' to drop
    // the kubelet-based alerts when Prometheus does not scrape kubelets.
    kubeletSelector: 'job="kubelet"',
    // The label that names the node on every series (relabelled from the
    // pod's node name by the PodMonitor in deploy/). Alerts group by it.
    nodeLabel: 'node',
    // Labels that identify one exporter target; recording rules keep them.
    clusterLabel: 'cluster',
    showMultiCluster: false,
    // The interval of the groups whose rules change over minutes or hours
    // (piling up, prediction over hours, mismatched settings): their
    // alerts wait 5m-1h before they fire, so a slower evaluation costs them
    // no lead, and the 6h prediction window is read 4 times less often
    // (docs/fleet.md). The groups racing the PLEG threshold keep
    // Prometheus' own evaluation interval.
    plegSlowRulesInterval: '1m',

    // The kubelet's PLEG threshold and gRPC receive limit (Go constants in
    // the kubelet: 3m, 16 MiB). The same with the EventedPLEG gate: since
    // v1.37 the generic relist keeps its 1s period and 3m threshold and the
    // evented watcher only asks for extra relists (measured on v1.37.2).
    kubeletPlegThresholdSeconds: 180,
    kubeletGrpcLimitBytes: 16777216,
    // Kubelets v1.26-v1.36 with the EventedPLEG gate on run the generic
    // relist every 300s with a 10m threshold (kubelet.go:
    // eventedPlegRelistPeriod, eventedPlegRelistThreshold; read in the
    // v1.34.4, v1.35.4 and v1.36.3 sources), and their evented health check
    // sets kubelet_pleg_last_seen_seconds to the time of the check, so the
    // gauge never ages. Matched on kubernetes_build_info's git_version
    // (release builds, EKS's v1.30.4-eks-... and GKE's alike; its major and
    // minor labels are empty in builds that do not set them).
    kubeletEventedPlegVersionRegex: 'v1[.](2[6-9]|3[0-6])[.].*',
    kubeletEventedPlegRelistPeriodSeconds: 300,
    kubeletEventedPlegThresholdSeconds: 600,
    // After this many failed CRI event streams (a runtime without
    // GetContainerEvents, such as containerd 1.6, or restarts) the kubelet
    // falls back to the generic relist at 1s / 3m for the rest of its life
    // (evented.go: eventedPlegMaxStreamRetries; the attempts never reset).
    kubeletEventedPlegMaxStreamRetries: 5,
    // How long the exporter's --pleg.threshold may differ from the kubelet's
    // before PLEGThresholdMismatch says so (a kubelet upgrade rolls nodes).
    plegThresholdMismatchFor: '1h',

    // Relist stall: seconds since the last relist the kubelet would accept.
    // With the exporter's 10s relist interval a healthy node stays below
    // ~12s; with 15s scrape and evaluation the warning reaches Alertmanager
    // at most ~90s after the runtime stopped answering, 90s before NotReady.
    plegStallWarningSeconds: 45,
    plegStallCriticalSeconds: 90,
    plegStallFor: '15s',

    // A runtime that stops answering: the relist's list calls in flight
    // longer than this. A kubelet whose runtime hangs so marks its node
    // NotReady ("container runtime is down") before the PLEG threshold: its
    // node status update waits in the runtime's Version call for its
    // --runtime-request-timeout (2m by default; measured in a cluster:
    // Ready=False 121s after containerd stopped). The exporter's list
    // starts within its 10s interval, passes 15s, and with 15s scrape and
    // evaluation the page reaches Alertmanager 20-60s after the runtime
    // stopped. The kubelet's own lists take under a second even at 100k
    // containers. Held through the gap between one hung list's deadline
    // and the next, so one hang is one page.
    plegRuntimeHungSeconds: 15,
    plegRuntimeHungFor: '0s',
    plegRuntimeHungKeepFiringFor: '2m',
    kubeletRuntimeRequestTimeoutSeconds: 120,

    // Slow relists: the two list calls alone (the kubelet adds per-pod
    // status calls on top).
    plegRelistSlowWarningSeconds: 10,
    plegRelistSlowCriticalSeconds: 60,
    plegRelistSlowFor: '1m',

    // Payload against the 16 MiB limit.
    plegPayloadWarningRatio: 0.75,
    plegPayloadCriticalRatio: 0.9,
    plegPayloadFor: '5m',
    // Predicted crossing: fit over this window, warn when the limit is
    // reached within the horizon.
    plegPayloadPredictionWindow: '6h',
    plegPayloadPredictionHorizonHours: 4,
    plegPayloadPredictionMinRatio: 0.5,
    plegPayloadPredictionFor: '15m',

    // Accumulation of containers the kubelet must list every second.
    plegExitedContainersWarning: 5000,
    plegNotReadySandboxesWarning: 1000,
    plegDeadContainersWarning: 1,
    plegAccumulationFor: '15m',

    // Status probes (PodSandboxStatus/ContainerStatus on suspects) that ran
    // into their deadline: each such call stalls a kubelet relist up to 2m.
    plegProbeTimeoutsWindow: '5m',
    plegProbeTimeoutsThreshold: 2,

    // The status pass: the kubelet's GetPodStatus of every changed pod (and
    // every pod whose inspection failed), one call after another, each with
    // a 2m deadline, before its next relist. One call that hangs makes
    // every relist 2m longer; a second such pod turns the node NotReady.
    // A status call in flight longer than this hangs: with 15s scrape and
    // evaluation it reaches Alertmanager at most 85s after the kubelet's
    // own hung relist started (the exporter's call starts within its 10s
    // interval, passes 30s, one scrape, one evaluation, the for), 95s before
    // two such pods turn the node NotReady. Healthy calls take milliseconds.
    plegStatusCallHangingSeconds: 30,
    plegStatusCallHangingFor: '15s',
    // Bridges the gap between one hung call's deadline and the same pod's
    // next hung call (the rest of the pass, --relist.interval, 30s), so one
    // stuck pod is one alert, not one per relist. PLEGRelistStalled and
    // PLEGKubeletStalled hold back as long as it holds: the stall is this.
    plegStatusCallHangingKeepFiringFor: '2m',
    // Pods the kubelet inspects again at every relist because their latest
    // inspection failed. A race with a pod going away clears at the next
    // relist; a pod failing for this long is stuck.
    plegReinspectPodsWarning: 1,
    plegReinspectPodsFor: '10m',
    // The kubelet's expected relist age, lists + status pass + its 1s period
    // + lists, within this margin of its threshold. One pod that hangs
    // (120s) is inside it, a busy node's pass of seconds far outside.
    kubeletPlegRelistPeriodSeconds: 1,
    plegStatusPassMarginSeconds: 90,
    plegStatusPassNearThresholdFor: '1m',

    // A kubelet whose PLEG never relisted since it started
    // (kubelet_pleg_last_seen_seconds stays 0): restarted into an overflow,
    // or started before its runtime answers. It reports "pleg has yet to be
    // successful" and its node is NotReady from the start.
    kubeletPlegNeverRelistedFor: '1m',
    // How long the kubelet's last CRIListStreaming gate value counts after
    // its series goes (a failed scrape, a restart).
    kubeletStreamingGateHold: '10m',

    plegRuntimeDownFor: '30s',
    plegExporterDownFor: '1m',
    plegExporterAbsentFor: '5m',

    // The kubelet's own PLEG metrics (scraped from the kubelet).
    kubeletPlegStallWarningSeconds: 45,
    kubeletPlegStallCriticalSeconds: 90,
    kubeletPlegRelistIntervalWarningSeconds: 5,
    kubeletPlegRelistIntervalFor: '30s',

    criticalSeverity: 'critical',
    warningSeverity: 'warning',

    runbookURLPattern: 'https://github.com/pleg-exporter/pleg_exporter/blob/main/docs/runbooks.md#%s',

    // Dashboards.
    dashboardTags: ['pleg-exporter-mixin'],
    dashboardNamePrefix: 'PLEG / ',
    dashboardUIDPrefix: 'pleg-',
    dashboardRefresh: '30s',
    dashboardTimezone: 'utc',
  },
}
