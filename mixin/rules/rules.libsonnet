{
  local c = $._config,

  prometheusRules+:: {
    groups+: [
      {
        name: 'pleg-exporter.rules',
        rules: [
          {
            // Fraction of the kubelet's gRPC limit each list answer uses.
            record: 'instance_rpc:pleg_relist_payload_bytes:ratio_limit',
            expr: |||
              pleg_relist_payload_bytes{%(plegExporterSelector)s}
                / ignoring (rpc) group_left ()
              pleg_relist_payload_limit_bytes{%(plegExporterSelector)s}
            ||| % c,
          },
          {
            // 1 where the kubelet lists through CRI list streaming: its
            // CRIListStreaming gate is on (kubernetes_feature_enabled, from
            // the kubelet's own /metrics) and the runtime streams. The gate's
            // last value holds through a failed scrape or a kubelet restart
            // (kubeletStreamingGateHold): a gap must not switch the node to
            // the whole answer and page it at once.
            record: 'instance:pleg_kubelet_list_streaming:bool',
            expr: |||
              max without (runtime, version, api_version, streaming) (pleg_runtime_info{%(plegExporterSelector)s, streaming="true"})
                and on (%(clusterLabel)s, %(nodeLabel)s)
              (last_over_time(kubernetes_feature_enabled{%(kubeletStreamingSelector)s, name="CRIListStreaming"}[%(kubeletStreamingGateHold)s]) == 1)
            ||| % c { kubeletStreamingSelector: if c.kubeletSelector == '' then 'job="kubelet-not-scraped"' else c.kubeletSelector },
          },
          {
            // What the kubelet's relist receives in one message, as a
            // fraction of its limit: the largest stream message where it
            // streams, the whole answer everywhere else. This, not the whole
            // answer, is what fails its relist.
            record: 'instance_rpc:pleg_relist_kubelet_payload_bytes:ratio_limit',
            expr: |||
              (
                pleg_relist_stream_message_max_bytes{%(plegExporterSelector)s}
                  / ignoring (rpc) group_left ()
                pleg_relist_payload_limit_bytes{%(plegExporterSelector)s}
              )
                and on (%(clusterLabel)s, %(nodeLabel)s)
              instance:pleg_kubelet_list_streaming:bool{%(plegExporterSelector)s}
              or
              instance_rpc:pleg_relist_payload_bytes:ratio_limit{%(plegExporterSelector)s}
            ||| % c,
          },
          {
            // The relist age as the kubelet meets it: where it streams lists
            // a relist whose whole answer is past the limit but whose every
            // message fits is one it accepts (pleg_streaming_last_seen_seconds).
            // PLEGRelistStalled has the same expression inline: through this
            // rule it would fire an evaluation later, lead time it lacks.
            record: 'instance:pleg_last_seen_seconds:kubelet_view',
            expr: |||
              pleg_streaming_last_seen_seconds{%(plegExporterSelector)s}
                and on (%(clusterLabel)s, %(nodeLabel)s)
              instance:pleg_kubelet_list_streaming:bool{%(plegExporterSelector)s}
              or
              pleg_last_seen_seconds{%(plegExporterSelector)s}
            ||| % c,
          },
          {
            // The larger of the two, as the kubelet receives them: what the
            // dashboards show against the limit.
            record: 'instance:pleg_relist_kubelet_payload_bytes:max_ratio_limit',
            expr: |||
              max without (rpc) (instance_rpc:pleg_relist_kubelet_payload_bytes:ratio_limit{%(plegExporterSelector)s})
            ||| % c,
          },
          {
            // The larger of the two answers: the one that fails first.
            record: 'instance:pleg_relist_payload_bytes:max_ratio_limit',
            expr: |||
              max without (rpc) (instance_rpc:pleg_relist_payload_bytes:ratio_limit{%(plegExporterSelector)s})
            ||| % c,
          },
          {
            // How far the relist age is towards the kubelet's threshold.
            record: 'instance:pleg_last_seen_seconds:ratio_threshold',
            expr: |||
              instance:pleg_last_seen_seconds:kubelet_view{%(plegExporterSelector)s}
                /
              pleg_relist_threshold_seconds{%(plegExporterSelector)s}
            ||| % c,
          },
          // The dashboards' top 10 nodes per cluster, recorded: a range
          // panel then reads 10 series a cluster instead of ranking every
          // node at every step (without them: 1.6-3.4 s a panel at 1,000
          // nodes over 6 h, measured by make bench-fleet).
          {
            record: 'node:pleg_relist_kubelet_payload_bytes:top10_max_ratio_limit',
            expr: |||
              topk by (%(clusterLabel)s) (10, max by (%(clusterLabel)s, %(nodeLabel)s) (instance:pleg_relist_kubelet_payload_bytes:max_ratio_limit{%(plegExporterSelector)s}))
            ||| % c,
          },
          {
            record: 'node:pleg_last_seen_seconds:top10_kubelet_view',
            expr: |||
              topk by (%(clusterLabel)s) (10, max by (%(clusterLabel)s, %(nodeLabel)s) (instance:pleg_last_seen_seconds:kubelet_view{%(plegExporterSelector)s}))
            ||| % c,
          },
          {
            record: 'node:pleg_relist_last_duration_seconds:top10_max',
            expr: |||
              topk by (%(clusterLabel)s) (10, max by (%(clusterLabel)s, %(nodeLabel)s) (pleg_relist_last_duration_seconds{%(plegExporterSelector)s}))
            ||| % c,
          },
          {
            record: 'node:pleg_relist_status_in_flight_seconds:top10_max',
            expr: |||
              topk by (%(clusterLabel)s) (10, max by (%(clusterLabel)s, %(nodeLabel)s) (pleg_relist_status_in_flight_seconds{%(plegExporterSelector)s}))
            ||| % c,
          },
          {
            record: 'node:pleg_relist_status_last_duration_seconds:top10_max',
            expr: |||
              topk by (%(clusterLabel)s) (10, max by (%(clusterLabel)s, %(nodeLabel)s) (pleg_relist_status_last_duration_seconds{%(plegExporterSelector)s}))
            ||| % c,
          },
        ],
      },
      {
        // What changes over minutes and hours, or reads hours of samples
        // (the prediction window): evaluated every
        // plegSlowRulesInterval, not at every 15 s evaluation.
        name: 'pleg-exporter.slow.rules',
        interval: c.plegSlowRulesInterval,
        rules: [
          {
            // Containers and sandboxes (pods) changed between two shadow
            // relists, per second: each changed pod costs the kubelet's
            // relist a GetPodStatus.
            record: 'instance:pleg_relist_changed_pods:rate5m',
            expr: |||
              rate(pleg_relist_changed_pods_total{%(plegExporterSelector)s}[5m])
            ||| % c,
          },
          {
            // Seconds until an answer reaches the limit at the growth of the
            // prediction window; absent when it is not growing.
            record: 'instance_rpc:pleg_relist_payload_bytes:seconds_to_limit',
            expr: |||
              (
                (1 - instance_rpc:pleg_relist_payload_bytes:ratio_limit{%(plegExporterSelector)s})
                  /
                deriv(instance_rpc:pleg_relist_payload_bytes:ratio_limit{%(plegExporterSelector)s}[%(plegPayloadPredictionWindow)s])
              ) > 0
            ||| % c,
          },
          {
            // Containers the kubelet lists every second without running them.
            record: 'instance:pleg_containers_exited_unknown:sum',
            expr: |||
              sum without (state) (pleg_containers{%(plegExporterSelector)s, state=~"exited|unknown"})
            ||| % c,
          },
          {
            record: 'node:pleg_containers_exited_unknown:top10_sum',
            expr: |||
              topk by (%(clusterLabel)s) (10, max by (%(clusterLabel)s, %(nodeLabel)s) (instance:pleg_containers_exited_unknown:sum{%(plegExporterSelector)s}))
            ||| % c,
          },
        ],
      },
    ] + (
      if c.kubeletSelector == '' then [] else [{
        // What each node's kubelet runs, read from its own /metrics: the
        // kubelet alerts and the dashboards judge its relist by these.
        name: 'pleg-kubelet.rules',
        rules: [
          {
            // 1 where the kubelet is v1.26-v1.36 with the EventedPLEG gate:
            // its evented health check sets kubelet_pleg_last_seen_seconds
            // to the time of the check, after the generic one, so the gauge
            // never ages. 0 for every other kubelet Prometheus scrapes.
            record: 'node:kubelet_pleg_evented_gate:bool',
            expr: |||
              max by (%(clusterLabel)s, %(nodeLabel)s) (
                kubernetes_feature_enabled{%(kubeletSelector)s, name="EventedPLEG"} == 1
                  and on (%(clusterLabel)s, %(nodeLabel)s)
                kubernetes_build_info{%(kubeletSelector)s, git_version=~"%(kubeletEventedPlegVersionRegex)s"}
              )
              or on (%(clusterLabel)s, %(nodeLabel)s)
              0 * group by (%(clusterLabel)s, %(nodeLabel)s) (kubernetes_build_info{%(kubeletSelector)s})
            ||| % c,
          },
          {
            // 1 where such a kubelet relists in the evented mode: every
            // 300s, NotReady at 10m. One whose CRI event streams failed
            // kubeletEventedPlegMaxStreamRetries times relists at 1s / 3m
            // again for the rest of its life.
            record: 'node:kubelet_pleg_evented_relist:bool',
            expr: |||
              (
                node:kubelet_pleg_evented_gate:bool == 1
                  unless on (%(clusterLabel)s, %(nodeLabel)s)
                kubelet_evented_pleg_connection_error_count{%(kubeletSelector)s} >= %(kubeletEventedPlegMaxStreamRetries)d
              )
              or on (%(clusterLabel)s, %(nodeLabel)s)
              0 * node:kubelet_pleg_evented_gate:bool
            ||| % c,
          },
          {
            // The kubelet's generic relist period.
            record: 'node:kubelet_pleg_relist_period_seconds',
            expr: |||
              %(kubeletPlegRelistPeriodSeconds)d + %(periodStep)d * node:kubelet_pleg_evented_relist:bool
            ||| % c { periodStep: c.kubeletEventedPlegRelistPeriodSeconds - c.kubeletPlegRelistPeriodSeconds },
          },
          {
            // The kubelet's PLEG threshold: NotReady when no relist has
            // succeeded for this long.
            record: 'node:kubelet_pleg_relist_threshold_seconds',
            expr: |||
              %(kubeletPlegThresholdSeconds)d + %(thresholdStep)d * node:kubelet_pleg_evented_relist:bool
            ||| % c { thresholdStep: c.kubeletEventedPlegThresholdSeconds - c.kubeletPlegThresholdSeconds },
          },
        ],
      }]
    ),
  },
}
