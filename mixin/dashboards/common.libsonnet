{
  local c = $._config,
  local g = import '../lib/g.libsonnet',

  // Matchers shared by every panel query.
  plegSel:: c.plegExporterSelector + (if c.showMultiCluster then ', %s="$cluster"' % c.clusterLabel else ''),
  // The records without the exporter's job (the top 10 per cluster).
  clusterSel:: if c.showMultiCluster then '%s="$cluster"' % c.clusterLabel else '',
  kubeletSel:: c.kubeletSelector + (if c.showMultiCluster then ', %s="$cluster"' % c.clusterLabel else ''),

  clusterVariable:: g.queryVariable(
    'cluster',
    'Cluster',
    'label_values(pleg_runtime_up{%s}, %s)' % [c.plegExporterSelector, c.clusterLabel],
    hide=if c.showMultiCluster then 0 else 2,
  ),
}
