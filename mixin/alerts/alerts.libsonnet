{
  local c = $._config,
  local sel = c.plegExporterSelector,
  // Kubelets v1.26-v1.36 with the EventedPLEG gate: their
  // kubelet_pleg_last_seen_seconds is the time of their last health check,
  // so it never ages (PLEGKubeletStalled and PLEGKubeletNeverRelisted cannot
  // see a stall there); while they relist in the evented mode, every 300s,
  // every interval passes the histogram's 10s top bucket
  // (PLEGKubeletRelistIntervalHigh would page a healthy node). The
  // exporter's own alerts judge them.
  local eventedGate = '(node:kubelet_pleg_evented_gate:bool == 1)',
  local eventedRelist = '(node:kubelet_pleg_evented_relist:bool == 1)',
  // A status call on the node hung within the last keep-firing window:
  // PLEGStatusCallHanging fires or still holds. The stall and reinspection
  // alerts it explains hold back meanwhile (one page for one stuck pod).
  local statusCallHung = |||
    max_over_time(pleg_relist_status_in_flight_seconds{%(plegExporterSelector)s}[%(plegStatusCallHangingKeepFiringFor)s]) > %(plegStatusCallHangingSeconds)d
  ||| % c,

  // A list call hung within PLEGRuntimeHung's keep-firing window: that
  // alert pages for it, and the relist it leaves behind (one that ran into
  // its deadline, recorded as a relist of that length) must not page again
  // as a slow one.
  local listHung = |||
    max_over_time(pleg_relist_list_in_flight_seconds{%(plegExporterSelector)s}[%(plegRuntimeHungKeepFiringFor)s]) > %(plegRuntimeHungSeconds)d
  ||| % c,

  prometheusAlerts+:: {
    groups+: [
      {
        name: 'pleg-exporter',
        rules: [
          {
            alert: 'PLEGRelistStalled',
            expr: |||
              (
                (
                  pleg_streaming_last_seen_seconds{%(plegExporterSelector)s}
                    and on (%(clusterLabel)s, %(nodeLabel)s)
                  instance:pleg_kubelet_list_streaming:bool{%(plegExporterSelector)s}
                  or
                  pleg_last_seen_seconds{%(plegExporterSelector)s}
                )
                  > %(plegStallWarningSeconds)d
              )
              unless on (%(clusterLabel)s, %(nodeLabel)s)
              (
                %(statusCallHung)s
              )
            ||| % c { statusCallHung: std.rstripChars(statusCallHung, '\n') },
            'for': c.plegStallFor,
            labels: { severity: c.warningSeverity },
            annotations: {
              summary: 'The container runtime has not answered a full relist for a while; the node goes NotReady at the PLEG threshold.',
              description: 'The last relist the kubelet would accept on {{ $labels.%(nodeLabel)s }} started {{ $value | humanizeDuration }} ago; at %(kubeletPlegThresholdSeconds)ds the kubelet reports "PLEG is not healthy" and the node turns NotReady.' % c,
            },
          },
          {
            alert: 'PLEGRelistStalled',
            expr: |||
              (
                (
                  pleg_streaming_last_seen_seconds{%(plegExporterSelector)s}
                    and on (%(clusterLabel)s, %(nodeLabel)s)
                  instance:pleg_kubelet_list_streaming:bool{%(plegExporterSelector)s}
                  or
                  pleg_last_seen_seconds{%(plegExporterSelector)s}
                )
                  > %(plegStallCriticalSeconds)d
              )
              unless on (%(clusterLabel)s, %(nodeLabel)s)
              (
                %(statusCallHung)s
              )
            ||| % c { statusCallHung: std.rstripChars(statusCallHung, '\n') },
            'for': c.plegStallFor,
            labels: { severity: c.criticalSeverity },
            annotations: {
              summary: 'The container runtime has not answered a full relist for half the PLEG threshold; the node is about to go NotReady.',
              description: 'The last relist the kubelet would accept on {{ $labels.%(nodeLabel)s }} started {{ $value | humanizeDuration }} ago; at %(kubeletPlegThresholdSeconds)ds the node turns NotReady. Cordon and drain it now.' % c,
            },
          },
          {
            alert: 'PLEGRelistSlow',
            expr: |||
              pleg_relist_last_duration_seconds{%(plegExporterSelector)s} > %(plegRelistSlowWarningSeconds)d
              unless on (%(clusterLabel)s, %(nodeLabel)s)
              (
                %(listHung)s
              )
            ||| % c { listHung: std.rstripChars(listHung, '\n') },
            'for': c.plegRelistSlowFor,
            labels: { severity: c.warningSeverity },
            annotations: {
              summary: 'Listing sandboxes and containers takes long; the kubelet relist adds status calls on top.',
              description: 'The two list calls of a relist took {{ $value | humanizeDuration }} on {{ $labels.%(nodeLabel)s }}; the kubelet relists every second and turns the node NotReady when one relist cycle passes %(kubeletPlegThresholdSeconds)ds.' % c,
            },
          },
          {
            alert: 'PLEGRelistSlow',
            expr: |||
              pleg_relist_last_duration_seconds{%(plegExporterSelector)s} > %(plegRelistSlowCriticalSeconds)d
              unless on (%(clusterLabel)s, %(nodeLabel)s)
              (
                %(listHung)s
              )
            ||| % c { listHung: std.rstripChars(listHung, '\n') },
            'for': '0m',
            labels: { severity: c.criticalSeverity },
            annotations: {
              summary: 'One relist took a third of the PLEG threshold.',
              description: 'The two list calls of a relist took {{ $value | humanizeDuration }} on {{ $labels.%(nodeLabel)s }}; with per-pod status calls the kubelet relist passes %(kubeletPlegThresholdSeconds)ds soon.' % c,
            },
          },
          {
            alert: 'PLEGPayloadOverLimit',
            expr: |||
              (
                (
                  pleg_relist_stream_message_max_bytes{%(plegExporterSelector)s}
                    / ignoring (rpc) group_left ()
                  pleg_relist_payload_limit_bytes{%(plegExporterSelector)s}
                )
                  and on (%(clusterLabel)s, %(nodeLabel)s)
                instance:pleg_kubelet_list_streaming:bool{%(plegExporterSelector)s}
                or
                pleg_relist_payload_bytes{%(plegExporterSelector)s}
                  / ignoring (rpc) group_left ()
                pleg_relist_payload_limit_bytes{%(plegExporterSelector)s}
              )
                >= 1
            ||| % c,
            'for': '0m',
            labels: { severity: c.criticalSeverity },
            annotations: {
              summary: 'What the kubelet receives of a CRI list at once is larger than its gRPC limit; the node goes NotReady within 3 minutes.',
              description: 'The {{ $labels.rpc }} answer on {{ $labels.%(nodeLabel)s }} (its largest stream message where the kubelet streams lists) is {{ $value | humanizePercentage }} of the kubelet gRPC limit: every kubelet relist and container GC now fails with ResourceExhausted and the node turns NotReady at %(kubeletPlegThresholdSeconds)ds. Cordon the node and remove exited containers.' % c,
            },
          },
          {
            alert: 'PLEGStatusProbesTimingOut',
            expr: |||
              sum without (kind) (increase(pleg_status_probe_timeouts_total{%(plegExporterSelector)s}[%(plegProbeTimeoutsWindow)s])) >= %(plegProbeTimeoutsThreshold)d
            ||| % c,
            'for': '0m',
            labels: { severity: c.warningSeverity },
            annotations: {
              summary: 'Status calls on notready sandboxes or unknown containers hang until their deadline.',
              description: '{{ $value | printf "%%.0f" }} status probes on {{ $labels.%(nodeLabel)s }} timed out in %(plegProbeTimeoutsWindow)s; the kubelet makes the same calls in its relist, each waiting up to its 2m deadline, so a few such sandboxes push the relist past %(kubeletPlegThresholdSeconds)ds.' % c,
            },
          },
          {
            alert: 'PLEGStatusCallHanging',
            expr: |||
              pleg_relist_status_in_flight_seconds{%(plegExporterSelector)s} > %(plegStatusCallHangingSeconds)d
            ||| % c,
            'for': c.plegStatusCallHangingFor,
            keep_firing_for: c.plegStatusCallHangingKeepFiringFor,
            labels: { severity: c.criticalSeverity },
            annotations: {
              summary: 'A status call of the relist hangs; the kubelet waits 2m for it every relist, and one more such pod turns the node NotReady.',
              description: 'A {{ $labels.rpc }} call on {{ $labels.%(nodeLabel)s }} has waited {{ $value | humanizeDuration }} for the runtime. The kubelet makes the same call for the same pod in every relist and waits up to its 2m deadline before it relists again: a second pod that hangs pushes its relist past %(kubeletPlegThresholdSeconds)ds and the node turns NotReady. Find the stuck shim of that pod (pleg_exporter diagnose names it).' % c,
            },
          },
          {
            alert: 'PLEGStatusPassNearThreshold',
            expr: |||
              (
                2 * pleg_relist_last_duration_seconds{%(plegExporterSelector)s}
                + %(kubeletPlegRelistPeriodSeconds)d
                + (
                  max without (rpc) (pleg_relist_status_in_flight_seconds{%(plegExporterSelector)s})
                    > pleg_relist_status_last_duration_seconds{%(plegExporterSelector)s}
                  or
                  pleg_relist_status_last_duration_seconds{%(plegExporterSelector)s}
                )
              )
                > pleg_relist_threshold_seconds{%(plegExporterSelector)s} - %(plegStatusPassMarginSeconds)d
            ||| % c,
            'for': c.plegStatusPassNearThresholdFor,
            labels: { severity: c.warningSeverity },
            annotations: {
              summary: 'The kubelet relist with its per-pod status calls comes within %(plegStatusPassMarginSeconds)ds of the PLEG threshold.' % c,
              description: 'Lists, status pass, the kubelet period and the next lists come to {{ $value | humanizeDuration }} per relist on {{ $labels.%(nodeLabel)s }} (the latest status pass, or the call in flight when longer); at %(kubeletPlegThresholdSeconds)ds the node turns NotReady. A pod whose status call hangs costs 2m a relist, every changed pod a status call per container.' % c,
            },
          },
          {
            alert: 'PLEGRuntimeHung',
            expr: |||
              pleg_relist_list_in_flight_seconds{%(plegExporterSelector)s} > %(plegRuntimeHungSeconds)d
            ||| % c,
            'for': c.plegRuntimeHungFor,
            keep_firing_for: c.plegRuntimeHungKeepFiringFor,
            labels: { severity: c.criticalSeverity },
            annotations: {
              summary: 'The container runtime has stopped answering list calls; the kubelet marks the node NotReady when its own calls reach their deadline.',
              description: 'The relist on {{ $labels.%(nodeLabel)s }} has waited {{ $value | humanizeDuration }} for the container runtime to answer a list call. The kubelet waits as long in its node status update and turns the node NotReady ("container runtime is down") at its %(kubeletRuntimeRequestTimeoutSeconds)ds --runtime-request-timeout, before the PLEG threshold. Check the runtime now (crictl version, its stack dump).' % c,
            },
          },
          {
            alert: 'PLEGRuntimeDown',
            expr: |||
              pleg_runtime_up{%(plegExporterSelector)s} == 0
            ||| % c,
            'for': c.plegRuntimeDownFor,
            labels: { severity: c.criticalSeverity },
            annotations: {
              summary: 'The container runtime does not answer list calls.',
              description: 'The container runtime on {{ $labels.%(nodeLabel)s }} did not answer the last relist (unreachable, failing or past its deadline); the kubelet cannot relist either.' % c,
            },
          },
          {
            alert: 'PLEGExporterDown',
            expr: |||
              up{%(plegExporterSelector)s} == 0
            ||| % c,
            'for': c.plegExporterDownFor,
            labels: { severity: c.warningSeverity },
            annotations: {
              summary: 'Prometheus cannot scrape a pleg_exporter; PLEG early warnings for its node are off.',
              description: 'pleg_exporter at {{ $labels.instance }} has been down for %(plegExporterDownFor)s.' % c,
            },
          },
        ],
      },
      {
        // Alerts that wait 5m or more before they fire: evaluated every
        // plegSlowRulesInterval (config.libsonnet).
        name: 'pleg-exporter.slow',
        interval: c.plegSlowRulesInterval,
        rules: [
          {
            alert: 'PLEGPayloadNearLimit',
            expr: |||
              instance_rpc:pleg_relist_kubelet_payload_bytes:ratio_limit{%(plegExporterSelector)s} > %(plegPayloadWarningRatio)s
            ||| % c,
            'for': c.plegPayloadFor,
            labels: { severity: c.warningSeverity },
            annotations: {
              summary: 'What the kubelet receives of a CRI list at once is approaching its gRPC limit of 16 MiB.',
              description: 'The {{ $labels.rpc }} answer on {{ $labels.%(nodeLabel)s }} (its largest stream message where the kubelet streams lists) is {{ $value | humanizePercentage }} of the kubelet gRPC limit; past it every relist and container GC fails and the node turns NotReady.' % c,
            },
          },
          {
            alert: 'PLEGPayloadNearLimit',
            expr: |||
              instance_rpc:pleg_relist_kubelet_payload_bytes:ratio_limit{%(plegExporterSelector)s} > %(plegPayloadCriticalRatio)s
            ||| % c,
            'for': c.plegPayloadFor,
            labels: { severity: c.criticalSeverity },
            annotations: {
              summary: 'What the kubelet receives of a CRI list at once is within 10% of its gRPC limit of 16 MiB.',
              description: 'The {{ $labels.rpc }} answer on {{ $labels.%(nodeLabel)s }} (its largest stream message where the kubelet streams lists) is {{ $value | humanizePercentage }} of the kubelet gRPC limit; remove exited containers before it crosses.' % c,
            },
          },
          {
            alert: 'PLEGPayloadPredictedOverLimit',
            expr: |||
              instance_rpc:pleg_relist_kubelet_payload_bytes:ratio_limit{%(plegExporterSelector)s} > %(plegPayloadPredictionMinRatio)s
              and
              predict_linear(instance_rpc:pleg_relist_kubelet_payload_bytes:ratio_limit{%(plegExporterSelector)s}[%(plegPayloadPredictionWindow)s], %(plegPayloadPredictionHorizonHours)d * 3600) >= 1
            ||| % c,
            'for': c.plegPayloadPredictionFor,
            labels: { severity: c.warningSeverity },
            annotations: {
              summary: 'A CRI list answer is predicted to pass the kubelet gRPC limit within hours.',
              description: 'At the rate of the last %(plegPayloadPredictionWindow)s the {{ $labels.rpc }} answer on {{ $labels.%(nodeLabel)s }} passes the kubelet gRPC limit within %(plegPayloadPredictionHorizonHours)d hours (now {{ $value | humanizePercentage }} of it); find the workload that leaves containers behind.' % c,
            },
          },
          {
            alert: 'PLEGExitedContainersPilingUp',
            expr: |||
              sum without (state) (pleg_containers{%(plegExporterSelector)s, state=~"exited|unknown"}) > %(plegExitedContainersWarning)d
            ||| % c,
            'for': c.plegAccumulationFor,
            labels: { severity: c.warningSeverity },
            annotations: {
              summary: 'Exited and unknown containers are piling up on a node.',
              description: '{{ $value }} exited or unknown containers on {{ $labels.%(nodeLabel)s }}; every one is in the kubelet ListContainers answer once a second.' % c,
            },
          },
          {
            alert: 'PLEGDeadContainers',
            expr: |||
              pleg_docker_containers{%(plegExporterSelector)s, state="dead"} >= %(plegDeadContainersWarning)d
            ||| % c,
            'for': c.plegAccumulationFor,
            labels: { severity: c.warningSeverity },
            annotations: {
              summary: 'Docker holds dead containers whose removal failed.',
              description: '{{ $value }} Docker containers on {{ $labels.%(nodeLabel)s }} are dead; status calls on them can hang, and the kubelet lists them as unknown.' % c,
            },
          },
          {
            alert: 'PLEGNotReadySandboxesPilingUp',
            expr: |||
              pleg_sandboxes{%(plegExporterSelector)s, state="notready"} > %(plegNotReadySandboxesWarning)d
            ||| % c,
            'for': c.plegAccumulationFor,
            labels: { severity: c.warningSeverity },
            annotations: {
              summary: 'Not-ready pod sandboxes are piling up on a node.',
              description: '{{ $value }} notready sandboxes on {{ $labels.%(nodeLabel)s }}; each is listed by every relist and their pod annotations fill the ListPodSandbox answer.' % c,
            },
          },
          {
            alert: 'PLEGPodsReinspected',
            expr: |||
              (
                pleg_relist_reinspect_pods{%(plegExporterSelector)s} >= %(plegReinspectPodsWarning)d
              )
              unless on (%(clusterLabel)s, %(nodeLabel)s)
              (
                %(statusCallHung)s
              )
            ||| % c { statusCallHung: std.rstripChars(statusCallHung, '\n') },
            'for': c.plegReinspectPodsFor,
            labels: { severity: c.warningSeverity },
            annotations: {
              summary: 'Pods fail their status inspection relist after relist; the kubelet ignores their events meanwhile.',
              description: '{{ $value }} pods on {{ $labels.%(nodeLabel)s }} failed their latest inspection for over %(plegReinspectPodsFor)s: the kubelet inspects them again at every relist and drops their events until one succeeds, so their status in the API stands still. pleg_exporter diagnose names them and the call that failed.' % c,
            },
          },
          {
            alert: 'PLEGExporterAbsent',
            expr: |||
              absent(up{%(plegExporterSelector)s})
            ||| % c,
            'for': c.plegExporterAbsentFor,
            labels: { severity: c.warningSeverity },
            annotations: {
              summary: 'No pleg_exporter target is known to Prometheus.',
              description: 'Prometheus has no target matching {{ `%(plegExporterSelector)s` }} for %(plegExporterAbsentFor)s: the PLEG alerts cannot fire.' % c,
            },
          },
        ],
      },
    ] + (
      if c.kubeletSelector == '' then [] else [{
        name: 'pleg-kubelet',
        rules: [
          {
            alert: 'PLEGKubeletStalled',
            expr: |||
              (
                (time() - kubelet_pleg_last_seen_seconds{%(kubeletSelector)s}) > %(kubeletPlegStallWarningSeconds)d
                and
                kubelet_pleg_last_seen_seconds{%(kubeletSelector)s} > 0
              )
              unless on (%(clusterLabel)s, %(nodeLabel)s)
              (
                %(statusCallHung)s
              )
              unless on (%(clusterLabel)s, %(nodeLabel)s)
              %(eventedGate)s
            ||| % c { statusCallHung: std.rstripChars(statusCallHung, '\n'), eventedGate: eventedGate },
            'for': c.plegStallFor,
            labels: { severity: c.warningSeverity },
            annotations: {
              summary: 'The kubelet PLEG has not relisted successfully for a while; the node goes NotReady at the threshold.',
              description: "The kubelet on {{ $labels.%(nodeLabel)s }} last relisted successfully {{ $value | humanizeDuration }} ago (threshold %(kubeletPlegThresholdSeconds)ds; kubelets before v1.37 with the EventedPLEG gate are left to the exporter's alerts)." % c,
            },
          },
          {
            alert: 'PLEGKubeletStalled',
            expr: |||
              (
                (time() - kubelet_pleg_last_seen_seconds{%(kubeletSelector)s}) > %(kubeletPlegStallCriticalSeconds)d
                and
                kubelet_pleg_last_seen_seconds{%(kubeletSelector)s} > 0
              )
              unless on (%(clusterLabel)s, %(nodeLabel)s)
              (
                %(statusCallHung)s
              )
              unless on (%(clusterLabel)s, %(nodeLabel)s)
              %(eventedGate)s
            ||| % c { statusCallHung: std.rstripChars(statusCallHung, '\n'), eventedGate: eventedGate },
            'for': c.plegStallFor,
            labels: { severity: c.criticalSeverity },
            annotations: {
              summary: 'The kubelet PLEG has not relisted successfully for half its threshold; the node is about to go NotReady.',
              description: 'The kubelet on {{ $labels.%(nodeLabel)s }} last relisted successfully {{ $value | humanizeDuration }} ago (threshold %(kubeletPlegThresholdSeconds)ds). Cordon and drain it now.' % c,
            },
          },
          {
            alert: 'PLEGKubeletNeverRelisted',
            expr: |||
              kubelet_pleg_last_seen_seconds{%(kubeletSelector)s} == 0
              unless on (%(clusterLabel)s, %(nodeLabel)s)
              %(eventedGate)s
            ||| % c { eventedGate: eventedGate },
            'for': c.kubeletPlegNeverRelistedFor,
            labels: { severity: c.criticalSeverity },
            annotations: {
              summary: 'The kubelet has not relisted once since it started; its node is NotReady.',
              description: 'The kubelet on {{ $labels.%(nodeLabel)s }} has run for over %(kubeletPlegNeverRelistedFor)s without one successful relist (kubelet_pleg_last_seen_seconds is 0): it reports "pleg has yet to be successful" and the node is NotReady. A kubelet restarted on a node whose list answers passed the limit never relists; restarting it again does not help.' % c,
            },
          },
          {
            alert: 'PLEGKubeletRelistIntervalHigh',
            expr: |||
              histogram_quantile(0.99, rate(kubelet_pleg_relist_interval_seconds_bucket{%(kubeletSelector)s}[1m])) >= %(kubeletPlegRelistIntervalWarningSeconds)d
              unless on (%(clusterLabel)s, %(nodeLabel)s)
              %(eventedRelist)s
            ||| % c { eventedRelist: eventedRelist },
            'for': c.kubeletPlegRelistIntervalFor,
            labels: { severity: c.warningSeverity },
            annotations: {
              summary: 'The kubelet relists far less often than once a second, although each relist may look fast.',
              description: 'The 99th percentile interval between kubelet relists on {{ $labels.%(nodeLabel)s }} is {{ $value | humanizeDuration }}: relists are failing (a failed relist still records a short duration) or hanging.' % c,
            },
          },
        ],
      }, {
        // Alerts that wait 5m or more before they fire: evaluated every
        // plegSlowRulesInterval (config.libsonnet).
        name: 'pleg-kubelet.slow',
        interval: c.plegSlowRulesInterval,
        rules: [
          {
            alert: 'PLEGThresholdMismatch',
            expr: |||
              node:kubelet_pleg_relist_threshold_seconds
                != on (%(clusterLabel)s, %(nodeLabel)s)
              max by (%(clusterLabel)s, %(nodeLabel)s) (pleg_relist_threshold_seconds{%(plegExporterSelector)s})
            ||| % c,
            'for': c.plegThresholdMismatchFor,
            labels: { severity: c.warningSeverity },
            annotations: {
              summary: "The exporter's --pleg.threshold is not the threshold this node's kubelet runs; its ratios and status-pass alert judge the wrong deadline.",
              description: 'The kubelet on {{ $labels.%(nodeLabel)s }} turns its node NotReady after {{ $value }}s without a relist (600s on kubelets before v1.37 with the EventedPLEG gate, 180s on the others); its pleg_exporter runs with another --pleg.threshold. Set the chart value plegThreshold for this node pool.' % c,
            },
          },
        ],
      }]
    ),
  },
}
