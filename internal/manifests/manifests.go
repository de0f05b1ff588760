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
// run them: the kustomize overlays' DaemonSet, and its pod template as the
// static pod a real kubelet runs.
package manifests

import (
	"bytes"
	"fmt"
	"path/filepath"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// StaticPod turns a DaemonSet's pod template into a pod a kubelet runs from
// its manifest directory: the same metadata, image, args, env, probes,
// securityContext and volumes. Two things change:
//   - where a hostPath points: hostPaths maps each of the DaemonSet's host
//     paths to the directory that stands for it on the test machine (a
//     private runtime's directory instead of /run/containerd); an unmapped
//     hostPath is an error;
//   - serviceAccountName goes: the kubelet refuses a static pod that names
//     one ("static pods may not reference serviceaccounts"), and with no
//     token mounted (automountServiceAccountToken: false, required here) the
//     account gives the pod nothing.
func StaticPod(ds *appsv1.DaemonSet, hostPaths map[string]string) (*corev1.Pod, error) {
	tpl := ds.Spec.Template.DeepCopy()
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: ds.Name, Namespace: ds.Namespace,
			Labels: tpl.Labels, Annotations: tpl.Annotations,
		},
		Spec: tpl.Spec,
	}
	if pod.Spec.ServiceAccountName != "" || pod.Spec.DeprecatedServiceAccount != "" {
		if a := pod.Spec.AutomountServiceAccountToken; a == nil || *a {
			return nil, fmt.Errorf("the pod mounts the token of service account %q: a static pod cannot have it", pod.Spec.ServiceAccountName)
		}
		pod.Spec.ServiceAccountName, pod.Spec.DeprecatedServiceAccount = "", ""
	}
	for i, v := range pod.Spec.Volumes {
		if v.HostPath == nil {
			continue
		}
		p, ok := hostPaths[v.HostPath.Path]
		if !ok {
			return nil, fmt.Errorf("volume %s: nothing stands for hostPath %s on this machine", v.Name, v.HostPath.Path)
		}
		pod.Spec.Volumes[i].HostPath.Path = p
	}
	return pod, nil
}
