(import 'common.libsonnet') +
(import 'fleet.libsonnet') +
(import 'node.libsonnet') +
{
  // Defaults applied to every dashboard in one place: a stable uid derived
  // from the file name, the mixin's tags, refresh and time zone.
  grafanaDashboards+:: {
    [name]+: {
      uid: $._config.dashboardUIDPrefix + std.strReplace(std.strReplace(name, '.json', ''), 'pleg-', ''),
      tags: $._config.dashboardTags,
      refresh: $._config.dashboardRefresh,
      timezone: $._config.dashboardTimezone,
    }
    for name in std.objectFields(super.grafanaDashboards)
  },
}
