// Package e2e proves the chain a user deploys on real components: exporter →
// Prometheus with the mixin's rules → Alertmanager → a webhook receiver.
package e2e
