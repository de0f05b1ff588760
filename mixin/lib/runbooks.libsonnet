// Adds a runbook_url to every alert that has none, pointing at the section
// of docs/runbooks.md named after the alert (lower case).
{
  prometheusAlerts+:: {
    groups: [
      group {
        rules: [
          rule {
            [if std.objectHas(rule, 'alert') && !std.objectHas(rule.annotations, 'runbook_url') then 'annotations']+: {
              runbook_url: $._config.runbookURLPattern % std.asciiLower(rule.alert),
            },
          }
          for rule in group.rules
        ],
      }
      for group in super.groups
    ],
  },
}
