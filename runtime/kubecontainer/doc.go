// Copyright 2026 The pleg_exporter Authors
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
// http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.

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
