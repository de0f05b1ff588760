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

package manifests

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/utils/ptr"
)

func TestStaticPodKeepsThePodTemplate(t *testing.T) {
	ds, err := DaemonSet("../../deploy/kubernetes/overlays/containerd")
	if err != nil {
		t.Fatal(err)
	}
	pod, err := StaticPod(ds, map[string]string{"/run/containerd": "/tmp/private/containerd"})
	if err != nil {
		t.Fatal(err)
	}
	want, got := ds.Spec.Template.Spec, pod.Spec
	if !reflect.DeepEqual(got.Containers, want.Containers) || !reflect.DeepEqual(got.SecurityContext, want.SecurityContext) {
		t.Error("containers or securityContext changed")
	}
	if got.Volumes[0].HostPath.Path != "/tmp/private/containerd" || want.Volumes[0].HostPath.Path != "/run/containerd" {
		t.Errorf("hostPath %s (DaemonSet %s)", got.Volumes[0].HostPath.Path, want.Volumes[0].HostPath.Path)
	}
	if got.ServiceAccountName != "" || want.ServiceAccountName == "" {
		t.Errorf("serviceAccountName %q (DaemonSet %q): a static pod may not name one", got.ServiceAccountName, want.ServiceAccountName)
	}
	got.Volumes, want.Volumes = nil, nil
	got.ServiceAccountName, want.ServiceAccountName = "", ""
	if !reflect.DeepEqual(got, want) {
		t.Errorf("pod spec differs beyond the hostPath and service account:\n%+v\n%+v", got, want)
	}
	if pod.Name != ds.Name || pod.Namespace != ds.Namespace || !reflect.DeepEqual(pod.Labels, ds.Spec.Template.Labels) {
		t.Errorf("metadata %s/%s %v", pod.Namespace, pod.Name, pod.Labels)
	}
}

func TestStaticPodRefusals(t *testing.T) {
	ds, err := DaemonSet("../../deploy/kubernetes/overlays/containerd")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := StaticPod(ds, nil); err == nil || !strings.Contains(err.Error(), "/run/containerd") {
		t.Errorf("unmapped hostPath: %v", err)
	}
	ds.Spec.Template.Spec.AutomountServiceAccountToken = ptr.To(true)
	if _, err := StaticPod(ds, map[string]string{"/run/containerd": "/x"}); err == nil {
		t.Error("a pod that mounts its service account token became a static pod")
	}
}
