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

// Package pleg is the shadow of the kubelet's generic PLEG: a Relister that
// repeats the kubelet's relist against the node's container runtime in one
// background loop, keeps the latest aggregates and the kubelet's "last seen
// active" time, and probes the status calls of suspect sandboxes.
//
// It reports what happened through the small Observer interface and holds no
// Prometheus type: the Prometheus collector (package collector) is one
// observer and reads State at scrape time. Nothing here is called by a scrape.
package pleg
