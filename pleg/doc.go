// Package pleg is the shadow of the kubelet's generic PLEG: a Relister that
// repeats the kubelet's relist against the node's container runtime in one
// background loop, keeps the latest aggregates and the kubelet's "last seen
// active" time, and probes the status calls of suspect sandboxes.
//
// It reports what happened through the small Observer interface and holds no
// Prometheus type: the Prometheus collector (package collector) is one
// observer and reads State at scrape time. Nothing here is called by a scrape.
package pleg
