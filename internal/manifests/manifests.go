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

// Package manifests renders the project's deploy files for the tests that
// run them: the kustomize overlays' DaemonSet (the cluster tests install the
// Helm chart itself).
package manifests

import (
	"bytes"
	"fmt"
	"path/filepath"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// DaemonSet renders a kustomize directory (e.g.
// deploy/kubernetes/overlays/containerd) and returns its DaemonSet, decoded
// strictly: a field the API type does not have is an error.
func DaemonSet(dir string) (*appsv1.DaemonSet, error) {
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	out, err := res.AsYaml()
	if err != nil {
		return nil, err
	}
	for _, doc := range bytes.Split(out, []byte("\n---\n")) {
		var meta struct{ Kind string }
		yaml.Unmarshal(doc, &meta)
		if meta.Kind == "DaemonSet" {
			var ds appsv1.DaemonSet
			if err := yaml.UnmarshalStrict(doc, &ds); err != nil {
				return nil, fmt.Errorf("%s: %w", filepath.Base(dir), err)
			}
			return &ds, nil
		}
	}
	return nil, fmt.Errorf("%s renders no DaemonSet", dir)
}
