// Small, fully specified Grafana (schemaVersion 39) builders: every option
// Grafana's schema requires is set, so dashboards strict-decode with
// grafana-foundation-sdk and import into Grafana 10/11 unchanged.
{
  local ds = { type: 'prometheus', uid: '${datasource}' },

  dashboard(title, uid, tags, refresh, timezone, variables, panels):: {
    title: title,
    uid: uid,
    tags: tags,
    timezone: timezone,
    refresh: refresh,
    editable: false,
    graphTooltip: 1,
    schemaVersion: 39,
    version: 1,
    fiscalYearStartMonth: 0,
    liveNow: false,
    weekStart: '',
    time: { from: 'now-6h', to: 'now' },
    timepicker: { refresh_intervals: ['10s', '30s', '1m', '5m', '15m', '30m', '1h'] },
    links: [],
    annotations: {
      list: [{
        builtIn: 1,
        datasource: { type: 'grafana', uid: '-- Grafana --' },
        enable: true,
        hide: true,
        iconColor: 'rgba(0, 211, 255, 1)',
        name: 'Annotations & Alerts',
        type: 'dashboard',
      }],
    },
    templating: { list: variables },
    // Lay panels out left to right, wrapping at 24 columns.
    panels: std.foldl(
      function(acc, p)
        local x = if acc.x + p.gridPos.w > 24 then 0 else acc.x;
        local y = if acc.x + p.gridPos.w > 24 then acc.y + acc.h else acc.y;
        local h = if acc.x + p.gridPos.w > 24 then p.gridPos.h else std.max(acc.h, p.gridPos.h);
        acc {
          x: x + p.gridPos.w,
          y: y,
          h: h,
          panels+: [p { id: std.length(acc.panels) + 1, gridPos+: { x: x, y: y } }],
        },
      panels,
      { x: 0, y: 0, h: 0, panels: [] }
    ).panels,
  },

  datasourceVariable():: {
    name: 'datasource',
    label: 'Data source',
    type: 'datasource',
    query: 'prometheus',
    current: { selected: true, text: 'default', value: 'default' },
    hide: 0,
    includeAll: false,
    multi: false,
    options: [],
    refresh: 1,
    regex: '',
    skipUrlSync: false,
  },

  queryVariable(name, label, query, includeAll=false, multi=false, hide=0):: {
    name: name,
    label: label,
    type: 'query',
    datasource: ds,
    query: { query: query, refId: 'PrometheusVariableQueryEditor-VariableQuery' },
    definition: query,
    current: { selected: false, text: '', value: '' },
    hide: hide,
    includeAll: includeAll,
    multi: multi,
    options: [],
    refresh: 2,
    regex: '',
    skipUrlSync: false,
    sort: 1,
  },

  target(expr, legend='', instant=false, format='time_series', refId='A'):: {
    datasource: ds,
    expr: expr,
    legendFormat: legend,
    instant: instant,
    range: !instant,
    format: format,
    refId: refId,
  },

  thresholds(steps):: {
    mode: 'absolute',
    steps: [{ color: 'green', value: null }] + [{ color: s[1], value: s[0] } for s in steps],
  },

  timeseries(title, description, targets, unit, w=12, h=8, thresholdSteps=[], min=null, max=null):: {
    type: 'timeseries',
    title: title,
    description: description,
    datasource: ds,
    gridPos: { h: h, w: w, x: 0, y: 0 },
    targets: targets,
    fieldConfig: {
      defaults: {
        unit: unit,
        [if min != null then 'min']: min,
        [if max != null then 'max']: max,
        color: { mode: 'palette-classic' },
        thresholds: $.thresholds(thresholdSteps),
        custom: {
          drawStyle: 'line',
          lineInterpolation: 'linear',
          lineWidth: 1,
          fillOpacity: 10,
          gradientMode: 'none',
          showPoints: 'never',
          pointSize: 5,
          spanNulls: false,
          axisPlacement: 'auto',
          axisLabel: '',
          axisCenteredZero: false,
          axisColorMode: 'text',
          axisBorderShow: false,
          barAlignment: 0,
          insertNulls: false,
          stacking: { mode: 'none', group: 'A' },
          scaleDistribution: { type: 'linear' },
          hideFrom: { legend: false, tooltip: false, viz: false },
          thresholdsStyle: { mode: if std.length(thresholdSteps) > 0 then 'line' else 'off' },
        },
      },
      overrides: [],
    },
    options: {
      legend: { calcs: ['lastNotNull', 'max'], displayMode: 'table', placement: 'bottom', showLegend: true },
      tooltip: { mode: 'multi', sort: 'desc' },
    },
  },

  stat(title, description, targets, unit, w=6, h=4, thresholdSteps=[]):: {
    type: 'stat',
    title: title,
    description: description,
    datasource: ds,
    gridPos: { h: h, w: w, x: 0, y: 0 },
    targets: targets,
    fieldConfig: {
      defaults: {
        unit: unit,
        color: { mode: 'thresholds' },
        thresholds: $.thresholds(thresholdSteps),
        mappings: [],
      },
      overrides: [],
    },
    options: {
      colorMode: 'background',
      graphMode: 'none',
      justifyMode: 'auto',
      orientation: 'auto',
      textMode: 'auto',
      wideLayout: true,
      showPercentChange: false,
      percentChangeColorMode: 'standard',
      reduceOptions: { calcs: ['lastNotNull'], fields: '', values: false },
    },
  },

  // A table of instant queries joined on the node, one column per query.
  table(title, description, targets, columns, w=24, h=10):: {
    type: 'table',
    title: title,
    description: description,
    datasource: ds,
    gridPos: { h: h, w: w, x: 0, y: 0 },
    targets: targets,
    transformations: [
      { id: 'merge', options: {} },
      {
        id: 'organize',
        options: {
          excludeByName: { Time: true },
          indexByName: {},
          renameByName: { ['Value #' + c.refId]: c.title for c in columns },
        },
      },
      { id: 'sortBy', options: { fields: {}, sort: [{ field: columns[0].title, desc: true }] } },
    ],
    fieldConfig: {
      defaults: {
        color: { mode: 'thresholds' },
        thresholds: $.thresholds([]),
        mappings: [],
        custom: {
          align: 'auto',
          cellOptions: { type: 'auto' },
          inspect: false,
          filterable: false,
        },
      },
      overrides: [
        {
          matcher: { id: 'byName', options: c.title },
          properties: [
            { id: 'unit', value: c.unit },
            { id: 'thresholds', value: $.thresholds(c.thresholds) },
            { id: 'custom.cellOptions', value: { type: 'color-background', mode: 'basic' } },
          ],
        }
        for c in columns
      ],
    },
    options: {
      showHeader: true,
      cellHeight: 'sm',
      frameIndex: 0,
      footer: { show: false, reducer: ['sum'], countRows: false, fields: '' },
      sortBy: [{ displayName: columns[0].title, desc: true }],
    },
  },
}
