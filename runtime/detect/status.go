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

package detect

import (
	"context"
	"fmt"
	"time"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// Every runtime Open returns can be asked for the status pass; the runtime
// under it answers, or an inspection that failed says why not.
var (
	_ kubecontainer.PodInspector = (*detecting)(nil)
	_ kubecontainer.PodInspector = (*withDocker)(nil)
)

// InspectPod is answered by the runtime that was detected: the CRI client
// (containerd, CRI-O, cri-dockerd) or, on a node whose kubelet spoke to
// Docker itself, the Docker client. Before a socket has appeared the
// inspection fails as Unavailable, as the relist does.
func (d *detecting) InspectPod(ctx context.Context, uid string, track kubecontainer.CallTracker) kubecontainer.PodInspection {
	rt, err := d.resolve()
	if err != nil {
		return failedInspection(uid, err)
	}
	return inspect(ctx, rt, uid, track)
}

// InspectPod on a cri-dockerd node is answered by the CRI client, through
// cri-dockerd: that is what the kubelet's GetPodStatus waits on (cri-dockerd's
// own Docker calls, and its network plugin, included). The Docker client
// beside it adds Docker's view to the relist and is not asked.
func (w *withDocker) InspectPod(ctx context.Context, uid string, track kubecontainer.CallTracker) kubecontainer.PodInspection {
	return inspect(ctx, w.Runtime, uid, track)
}

func inspect(ctx context.Context, rt kubecontainer.Runtime, uid string, track kubecontainer.CallTracker) kubecontainer.PodInspection {
	if pi, ok := rt.(kubecontainer.PodInspector); ok {
		return pi.InspectPod(ctx, uid, track)
	}
	return failedInspection(uid, &noInspectorError{runtime: fmt.Sprintf("%T", rt)})
}

// failedInspection is an inspection that made no call.
func failedInspection(uid string, err error) kubecontainer.PodInspection {
	return kubecontainer.PodInspection{UID: uid, Start: time.Now(), Err: err}
}

// noInspectorError is a runtime client without the status pass.
type noInspectorError struct{ runtime string }

func (e *noInspectorError) Error() string {
	return "the runtime client " + e.runtime + " cannot inspect pods (no status pass)"
}

// Code is the gRPC name of a call a server does not implement.
func (e *noInspectorError) Code() string { return "Unimplemented" }
