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
            // The larger of the two answers: the one that fails first.
            record: 'instance:pleg_relist_payload_bytes:max_ratio_limit',
            expr: |||
              max without (rpc) (instance_rpc:pleg_relist_payload_bytes:ratio_limit{%(plegExporterSelector)s})
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
            // How far the relist age is towards the kubelet's threshold.
            record: 'instance:pleg_last_seen_seconds:ratio_threshold',
            expr: |||
              pleg_last_seen_seconds{%(plegExporterSelector)s}
                /
              pleg_relist_threshold_seconds{%(plegExporterSelector)s}
            ||| % c,
          },
        ],
      },
    ],
  },
}
