{
  local c = $._config,
  local g = import '../lib/g.libsonnet',
  local m = $,
  local sel = m.plegSel,
  local by = c.nodeLabel,

  grafanaDashboards+:: {
    'pleg-fleet.json': g.dashboard(
      c.dashboardNamePrefix + 'Fleet overview',
      'pleg-fleet',
      c.dashboardTags,
      c.dashboardRefresh,
      c.dashboardTimezone,
      [g.datasourceVariable(), m.clusterVariable],
      [
        g.stat(
          'Nodes reporting',
          'Nodes whose pleg_exporter Prometheus scrapes.',
          [g.target('count(pleg_runtime_up{%s})' % sel, instant=true)],
          'none',
        ),
        g.stat(
          'Runtimes not answering',
          'Nodes whose container runtime did not answer the last relist.',
          [g.target('count(pleg_runtime_up{%s} == 0) or vector(0)' % sel, instant=true)],
          'none',
          thresholdSteps=[[1, 'red']],
        ),
        g.stat(
          'Nodes past the limit',
          'Nodes where what the kubelet receives of a list at once (the whole answer, or the largest stream message where it streams lists) is larger than its gRPC limit: their kubelet cannot relist and they go NotReady.',
          [g.target('count(instance:pleg_relist_kubelet_payload_bytes:max_ratio_limit{%s} >= 1) or vector(0)' % sel, instant=true)],
          'none',
          thresholdSteps=[[1, 'red']],
        ),
        g.stat(
          'Worst last seen',
          'The largest relist age in the fleet; at %(kubeletPlegThresholdSeconds)ds a node turns NotReady.' % c,
          [g.target('max(instance:pleg_last_seen_seconds:kubelet_view{%s})' % sel, instant=true)],
          's',
          thresholdSteps=[[c.plegStallWarningSeconds, 'orange'], [c.plegStallCriticalSeconds, 'red']],
        ),
        g.table(
          'Nodes by risk',
          'Every node, worst payload first. Colours change at the alert thresholds. Open the node dashboard for the one at the top.',
          [
            g.target('max by (%s) (instance:pleg_relist_kubelet_payload_bytes:max_ratio_limit{%s})' % [by, sel], instant=true, format='table', refId='A'),
            g.target('max by (%s) (instance:pleg_last_seen_seconds:kubelet_view{%s})' % [by, sel], instant=true, format='table', refId='B'),
            g.target('max by (%s) (pleg_relist_duration_seconds{%s})' % [by, sel], instant=true, format='table', refId='C'),
            g.target('max by (%s) (instance:pleg_containers_exited_unknown:sum{%s})' % [by, sel], instant=true, format='table', refId='D'),
          ],
          [
            { refId: 'A', title: 'Payload of limit', unit: 'percentunit', thresholds: [[c.plegPayloadWarningRatio, 'orange'], [c.plegPayloadCriticalRatio, 'red']] },
            { refId: 'B', title: 'Last seen', unit: 's', thresholds: [[c.plegStallWarningSeconds, 'orange'], [c.plegStallCriticalSeconds, 'red']] },
            { refId: 'C', title: 'Relist duration', unit: 's', thresholds: [[c.plegRelistSlowWarningSeconds, 'orange'], [c.plegRelistSlowCriticalSeconds, 'red']] },
            { refId: 'D', title: 'Exited + unknown', unit: 'short', thresholds: [[c.plegExitedContainersWarning, 'orange']] },
          ],
        ),
        g.timeseries(
          'Payload of the limit, top 10 nodes',
          'What the kubelet of each node receives of its larger list at once (the largest stream message where it streams lists), as a fraction of its gRPC limit.',
          [g.target('topk(10, max by (%s) (instance:pleg_relist_kubelet_payload_bytes:max_ratio_limit{%s}))' % [by, sel], '{{%s}}' % by)],
          'percentunit',
          thresholdSteps=[[c.plegPayloadWarningRatio, 'orange'], [c.plegPayloadCriticalRatio, 'red']],
        ),
        g.timeseries(
          'Last seen, top 10 nodes',
          'Relist age of the worst nodes against the alert thresholds.',
          [g.target('topk(10, max by (%s) (instance:pleg_last_seen_seconds:kubelet_view{%s}))' % [by, sel], '{{%s}}' % by)],
          's',
          thresholdSteps=[[c.plegStallWarningSeconds, 'orange'], [c.plegStallCriticalSeconds, 'red']],
        ),
        g.timeseries(
          'Exited + unknown containers, top 10 nodes',
          'Containers each node lists every second without running them.',
          [g.target('topk(10, max by (%s) (instance:pleg_containers_exited_unknown:sum{%s}))' % [by, sel], '{{%s}}' % by)],
          'short',
        ),
        g.timeseries(
          'Relist duration, top 10 nodes',
          'Wall time of the two list calls on the slowest nodes.',
          [g.target('topk(10, max by (%s) (pleg_relist_duration_seconds{%s}))' % [by, sel], '{{%s}}' % by)],
          's',
        ),
      ],
    ),
  },
}
