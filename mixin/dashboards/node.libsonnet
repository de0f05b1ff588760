{
  local c = $._config,
  local g = import '../lib/g.libsonnet',
  local m = $,
  local sel = m.plegSel + ', %s="$node"' % c.nodeLabel,
  local ksel = m.kubeletSel + ', %s="$node"' % c.nodeLabel,

  grafanaDashboards+:: {
    'pleg-node.json': g.dashboard(
      c.dashboardNamePrefix + 'Node',
      'pleg-node',
      c.dashboardTags,
      c.dashboardRefresh,
      c.dashboardTimezone,
      [
        g.datasourceVariable(),
        m.clusterVariable,
        g.queryVariable('node', 'Node', 'label_values(pleg_runtime_up{%s}, %s)' % [m.plegSel, c.nodeLabel]),
      ],
      [
        g.stat(
          'Last seen active',
          'Seconds since the start of the last relist the kubelet would accept. At %(kubeletPlegThresholdSeconds)ds the node turns NotReady ("PLEG is not healthy"). Orange and red are the alert thresholds: cordon and drain at red.' % c,
          [g.target('max(instance:pleg_last_seen_seconds:kubelet_view{%s})' % sel, instant=true)],
          's',
          thresholdSteps=[[c.plegStallWarningSeconds, 'orange'], [c.plegStallCriticalSeconds, 'red']],
        ),
        g.stat(
          'Payload of the limit',
          'What the kubelet receives of the larger list at once (the whole answer; the largest stream message where it streams lists) as a fraction of its gRPC limit (16 MiB). Past 100% every relist and container GC fails. Remove exited containers before it gets there (see the runbook).',
          [g.target('max(instance:pleg_relist_kubelet_payload_bytes:max_ratio_limit{%s})' % sel, instant=true)],
          'percentunit',
          thresholdSteps=[[c.plegPayloadWarningRatio, 'orange'], [c.plegPayloadCriticalRatio, 'red']],
        ),
        g.stat(
          'Predicted time to the limit',
          'At the growth of the last %(plegPayloadPredictionWindow)s, how long until a list answer passes the kubelet gRPC limit. "No growth" when it is not growing.' % c,
          [g.target('min(instance_rpc:pleg_relist_payload_bytes:seconds_to_limit{%s}) or on () vector(+Inf)' % sel, instant=true)],
          's',
          thresholdSteps=[],
        ) + { fieldConfig+: { defaults+: {
          thresholds: { mode: 'absolute', steps: [{ color: 'red', value: null }, { color: 'orange', value: 4 * 3600 }, { color: 'green', value: 24 * 3600 }] },
          mappings: [{ type: 'special', options: { match: 'nan', result: { text: 'No growth', index: 0 } } }, { type: 'value', options: { '+Inf': { text: 'No growth', index: 1 } } }],
        } } },
        g.stat(
          'Runtime answers',
          'Whether the container runtime answered the last relist with exact counts. "Fallback" means the unfiltered list failed (the kubelet is blind) and the counts came from filtered lists.',
          [g.target('max(pleg_runtime_up{%s}) + max(pleg_relist_fallback{%s})' % [sel, sel], instant=true)],
          'none',
        ) + { fieldConfig+: { defaults+: {
          thresholds: { mode: 'absolute', steps: [{ color: 'red', value: null }, { color: 'green', value: 1 }, { color: 'orange', value: 2 }] },
          mappings: [{ type: 'value', options: { '0': { text: 'Down', index: 0 }, '1': { text: 'Up', index: 1 }, '2': { text: 'Fallback', index: 2 } } }],
        } } },
        g.timeseries(
          'Containers by state',
          'Containers in every relist answer, by CRI state. Exited and unknown containers are what grows the ListContainers answer; find the namespace that leaves them behind.',
          [g.target('sum by (state) (pleg_containers{%s})' % sel, '{{state}}')],
          'short',
        ),
        g.timeseries(
          'Sandboxes by state',
          'Pod sandboxes by state. Notready sandboxes of finished pods stay listed until the kubelet GC removes them; their pod annotations fill ListPodSandbox.',
          [g.target('sum by (state) (pleg_sandboxes{%s})' % sel, '{{state}}')],
          'short',
        ),
        g.timeseries(
          'Payload vs the kubelet limit',
          'Serialized size of each list answer against the kubelet gRPC receive limit. Past the limit the size comes from the runtime error and the kubelet relist fails every second, unless the kubelet streams lists (CRIListStreaming) and every stream message stays under the limit: then the largest stream message is what counts.',
          [
            g.target('max by (rpc) (pleg_relist_payload_bytes{%s})' % sel, '{{rpc}}'),
            g.target('max(pleg_relist_payload_limit_bytes{%s})' % sel, 'kubelet limit', refId='B'),
            g.target('max by (rpc) (pleg_relist_stream_message_max_bytes{%s})' % sel, 'largest stream message {{rpc}}', refId='C'),
          ],
          'bytes',
        ),
        g.timeseries(
          'Relist duration',
          'Time of the two unfiltered list calls (ours) and the kubelet relist p99 when Prometheus scrapes the kubelet. The kubelet histogram stops at 10 s and records fast failures as healthy durations; ours does not.',
          [
            g.target('max(pleg_relist_last_duration_seconds{%s})' % sel, 'shadow relist'),
            g.target('max by (rpc) (pleg_relist_rpc_last_duration_seconds{%s})' % sel, '{{rpc}}', refId='B'),
            g.target('histogram_quantile(0.99, sum by (le) (rate(kubelet_pleg_relist_duration_seconds_bucket{%s}[$__rate_interval])))' % ksel, 'kubelet p99', refId='C'),
          ],
          's',
        ),
        g.timeseries(
          'Status pass',
          'The second half of the kubelet relist, as the exporter repeats it: GetPodStatus of every changed pod and every pod to reinspect, one call after another, each with a 2m deadline, against the two lists. Expected kubelet relist: lists + status pass (or the call in flight, when longer) + 1s + lists; at %(kubeletPlegThresholdSeconds)ds the node turns NotReady. A call in flight past the orange line hangs (PLEGStatusCallHanging); the expected relist past the red line is PLEGStatusPassNearThreshold.' % c,
          [
            g.target('max(pleg_relist_status_last_duration_seconds{%s})' % sel, 'status pass'),
            g.target('max(pleg_relist_last_duration_seconds{%s})' % sel, 'lists', refId='B'),
            g.target('max by (rpc) (pleg_relist_status_in_flight_seconds{%s})' % sel, 'in flight {{rpc}}', refId='C'),
            g.target(|||
              max(
                2 * pleg_relist_last_duration_seconds{%(sel)s} + %(period)d
                + (max without (rpc) (pleg_relist_status_in_flight_seconds{%(sel)s}) > pleg_relist_status_last_duration_seconds{%(sel)s}
                   or pleg_relist_status_last_duration_seconds{%(sel)s})
              )
            ||| % { sel: sel, period: c.kubeletPlegRelistPeriodSeconds }, 'expected kubelet relist', refId='D'),
          ],
          's',
          thresholdSteps=[[c.plegStatusCallHangingSeconds, 'orange'], [c.kubeletPlegThresholdSeconds - c.plegStatusPassMarginSeconds, 'red']],
        ),
        g.timeseries(
          'Status pass: pods and calls',
          'Pods the latest status pass inspected, the pods whose inspection failed and are inspected again at every relist (the kubelet ignores their events meanwhile), the pods listed at exporter start not inspected yet, the calls of the latest pass by RPC, and failed inspections by gRPC code. Pods to reinspect that stay are stuck pods: pleg_exporter diagnose and the exporter log name them.',
          [
            g.target('max(pleg_relist_status_pods{%s})' % sel, 'pods inspected'),
            g.target('max(pleg_relist_reinspect_pods{%s})' % sel, 'pods to reinspect', refId='B'),
            g.target('max(pleg_relist_status_pending_pods{%s})' % sel, 'not inspected yet (start-up)', refId='C'),
            g.target('max by (rpc) (pleg_relist_status_calls{%s})' % sel, 'calls {{rpc}}', refId='D'),
            g.target('sum by (code) (increase(pleg_relist_status_failures_total{%s}[$__rate_interval]))' % sel, 'failed inspections {{code}}', refId='E'),
          ],
          'short',
        ),
        g.timeseries(
          'Last seen vs threshold',
          'Age of the last accepted relist, ours and the kubelet own (time() - kubelet_pleg_last_seen_seconds), against the threshold. A healthy node shows a sawtooth below the relist interval. It includes the status pass: one status call that hangs makes it climb to about 2 minutes at every relist (see Status pass). The list call in flight climbs from the first second of a runtime that stopped answering: the kubelet turns the node NotReady (container runtime is down) when its own calls reach their 2m deadline, before the threshold.',
          [
            g.target('max(instance:pleg_last_seen_seconds:kubelet_view{%s})' % sel, 'shadow relist'),
            g.target('max(time() - kubelet_pleg_last_seen_seconds{%s} and kubelet_pleg_last_seen_seconds{%s} > 0)' % [ksel, ksel], 'kubelet', refId='B'),
            g.target('max(pleg_relist_threshold_seconds{%s})' % sel, 'threshold', refId='C'),
            g.target('max(pleg_relist_list_in_flight_seconds{%s})' % sel, 'list call in flight', refId='D'),
          ],
          's',
          thresholdSteps=[[c.plegStallWarningSeconds, 'orange'], [c.plegStallCriticalSeconds, 'red']],
        ),
        g.timeseries(
          'Churn between relists',
          'Pods and containers (sandboxes included) that appeared, went or changed state between two shadow relists, per second. The kubelet calls GetPodStatus for every changed pod inside its relist: high churn makes its relist slow even when the lists are small (compare the kubelet p99 in Relist duration).',
          [
            g.target('sum(rate(pleg_relist_changed_pods_total{%s}[$__rate_interval]))' % sel, 'pods/s'),
            g.target('sum(rate(pleg_relist_changed_containers_total{%s}[$__rate_interval]))' % sel, 'containers/s', refId='B'),
          ],
          'ops',
        ),
        g.timeseries(
          'Relist errors by code',
          'Relists the kubelet would have failed. ResourceExhausted: an answer over the limit (clean up containers). DeadlineExceeded: the runtime hangs. Unavailable: the runtime is down.',
          [g.target('sum by (code) (rate(pleg_relist_errors_total{%s}[$__rate_interval]))' % sel, '{{code}}')],
          'ops',
        ),
        g.timeseries(
          'Top namespaces by containers',
          'The namespaces holding the most containers on this node (--collector.namespaces; the rest summed as "other"). The one that grows is the workload leaving containers behind: fix its Job/CronJob cleanup. pleg_exporter diagnose on the node lists the pods.',
          [g.target('topk(10, sum by (namespace) (pleg_namespace_containers{%s}))' % sel, '{{namespace}}')],
          'short',
        ) + { fieldConfig+: { defaults+: { noValue: 'Start the exporter with --collector.namespaces' } } },
        g.timeseries(
          'Status probes',
          'Latency of the status calls on notready sandboxes and unknown containers, and how many ran into their deadline. Timeouts here are the calls that stall the kubelet relist for minutes: remove those sandboxes (see the runbook).',
          [
            g.target('histogram_quantile(0.99, sum by (kind, le) (rate(pleg_status_probe_duration_seconds_bucket{%s}[$__rate_interval])))' % sel, 'p99 {{kind}}'),
            g.target('sum by (kind) (rate(pleg_status_probe_timeouts_total{%s}[$__rate_interval]))' % sel, 'timeouts/s {{kind}}', refId='B'),
          ],
          's',
        ) + { fieldConfig+: { defaults+: { noValue: 'No suspects probed (no notready sandboxes or unknown containers)' } } },
        g.timeseries(
          'Docker containers by state',
          'Docker own states on Docker and cri-dockerd nodes; only Docker shows dead containers (a removal that failed). Empty on containerd and CRI-O nodes.',
          [g.target('sum by (state) (pleg_docker_containers{%s})' % sel, '{{state}}')],
          'short',
          w=24,
        ),
      ],
    ),
  },
}
