// Package kubecontainer is the runtime layer's model, named after the
// kubelet's pkg/kubelet/container: what one relist of a node's container
// runtime found (Snapshot), the full listing behind a report (Inventory),
// container and sandbox states as the kubelet names them, the error codes of
// a failed relist, and the Runtime interface every adapter implements
// (runtime/cri, runtime/docker, runtime/detect).
//
// Nothing here knows of Prometheus: the shadow PLEG loop (package pleg), the
// Prometheus collector (package collector) and the reports (package
// diagnose) all build on this package, never the other way round.
package kubecontainer
