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

package fleet

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// Paths of a node's two targets on the simulator's listener.
const (
	exporterPath = "/nodes/%s/%s/metrics"
	kubeletPath  = "/nodes/%s/%s/kubelet/metrics"
)

// Handler serves every node's targets: /nodes/CLUSTER/NODE/metrics (the
// exporter) and /nodes/CLUSTER/NODE/kubelet/metrics (the kubelet).
func (s *Sim) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/nodes/"), "/")
		if len(parts) < 3 {
			http.NotFound(w, r)
			return
		}
		n, ok := s.byKey[parts[0]+"/"+parts[1]]
		switch {
		case !ok:
			http.NotFound(w, r)
		case len(parts) == 3 && parts[2] == "metrics":
			n.exporter.ServeHTTP(w, r)
		case len(parts) == 4 && parts[2] == "kubelet" && parts[3] == "metrics":
			n.kubelet.ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	})
}

// Serve listens on addr (a loopback address, port 0 for any) until the
// listener is closed; it returns the listener.
func (s *Sim) Serve(addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	return l, nil
}

// TargetGroup is one entry of a Prometheus file_sd file.
type TargetGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

// Targets are a cluster's scrape targets on the simulator at addr, with the
// labels kube-prometheus-stack's PodMonitor (deploy/) and kubelet
// ServiceMonitor give them: job, node, instance (the pod's or node's IP and
// port), namespace, and for the kubelet service, endpoint and metrics_path.
func (s *Sim) Targets(cluster, addr string) []TargetGroup {
	var out []TargetGroup
	for _, n := range s.nodes {
		if n.Cluster == cluster {
			out = append(out, s.nodeTargets(n, addr)...)
		}
	}
	return out
}

// nodeTargets are a node's exporter and kubelet targets.
func (s *Sim) nodeTargets(n *Node, addr string) []TargetGroup {
	return []TargetGroup{{Targets: []string{addr}, Labels: map[string]string{
		"__metrics_path__": fmt.Sprintf(exporterPath, n.Cluster, n.Name),
		"job":              "pleg-exporter", "node": n.Name, "instance": n.IP + ":10391",
		"namespace": "monitoring", "pod": "pleg-exporter-" + n.Name[len(n.Name)-5:], "container": "pleg-exporter",
	}}, {Targets: []string{addr}, Labels: map[string]string{
		"__metrics_path__": fmt.Sprintf(kubeletPath, n.Cluster, n.Name),
		"job":              "kubelet", "node": n.Name, "instance": n.IP + ":10250", "metrics_path": "/metrics",
		"namespace": "kube-system", "service": "kubelet", "endpoint": "https-metrics",
	}}}
}

// WriteTargets writes a cluster's targets as a file_sd file.
func (s *Sim) WriteTargets(path, cluster, addr string) error {
	return WriteTargetGroups(path, s.Targets(cluster, addr))
}

// WriteTargetGroups writes target groups as a file_sd file, whole: a
// Prometheus reading it meanwhile sees the old file or the new one.
func WriteTargetGroups(path string, groups []TargetGroup) error {
	b, err := json.Marshal(groups)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
