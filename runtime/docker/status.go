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

package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/errdefs"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// The status pass over the Docker API: the kubelet's GetPodStatus of one pod
// as cri-dockerd turns each of its CRI calls into Docker calls (core/ in
// cri-dockerd). Every Docker call is a GET through the client's guards.
//
//	ListPodSandbox{uid}  GET /containers/json?all=1&filters={"label":{
//	                         "io.kubernetes.docker.type=podsandbox":true,
//	                         "io.kubernetes.pod.uid=<uid>":true}}
//	                     (sandbox_list.go). cri-dockerd reads its checkpoint
//	                     files only for an unfiltered list: none here, and
//	                     they are files, never Docker calls.
//	PodSandboxStatus     GET /containers/<id>/json (sandbox_status.go,
//	                     getPodSandboxDetails); then, for a sandbox not on
//	                     the host network, the network plugin asks for the
//	                     pod's IP: the CNI plugin (cri-dockerd's default)
//	                     gets the network namespace through the same
//	                     inspect again (GetNetNS, sandbox_port_forward.go)
//	                     and runs nsenter … ip addr (not a Docker call;
//	                     neither is the plugin manager's per-pod lock it
//	                     waits on first).
//	ListContainers{uid}  GET /containers/json?all=1&filters={"label":{
//	                         "io.kubernetes.docker.type=container":true,
//	                         "io.kubernetes.pod.uid=<uid>":true}}
//	                     (container_list.go).
//	ContainerStatus      GET /containers/<id>/json, then GET
//	                     /images/<image id>/json for the pullable image id,
//	                     an image that is gone not being an error
//	                     (container_status.go, InspectImageByID).
//
// The filters are encoded as moby's client encodes cri-dockerd's (API 1.22
// and later: a set per key); the array form of API 1.21 means the same to
// the daemon.
//
// What the exporter cannot see, it approximates: cri-dockerd skips the
// network plugin for a sandbox whose network it tore down itself (an
// in-memory map); here the second inspect is made for running sandboxes
// only, those whose network it set up.

var _ kubecontainer.PodInspector = (*Client)(nil)

// statusFilter is the filter of a filtered list: cri-dockerd's type
// label, and the one label selector of the kubelet's GetPodStatus.
func statusFilter(kind, uid string) string {
	f := filters.NewArgs(
		filters.Arg("label", typeLabel+"="+kind),
		filters.Arg("label", podUIDLabel+"="+uid),
	)
	s, err := filters.ToJSON(f)
	if err != nil { // a map of strings always marshals
		panic(err)
	}
	return s
}

// InspectPod performs the kubelet's GetPodStatus of the pod with this uid
// through the Docker calls cri-dockerd makes for it, each CRI call within
// one deadline (Config.Timeout), one after another. A container or sandbox
// that Docker no longer knows (404) is skipped, as the kubelet skips
// NotFound; any other error ends the inspection.
//
// Where cri-dockerd differs, this follows the PodInspector contract: it
// passes Docker's 404 on as a plain error, which gRPC sends as Unknown (a
// kubelet on cri-dockerd fails that pod's inspection and retries it at the
// next relist), and it ends a hung Docker call at its own timeout (2m-1s
// unless --runtime-request-timeout says otherwise), a second before the
// kubelet's deadline, as Unknown "operation timeout". On a cri-dockerd node
// the CRI client answers the status pass (runtime/detect) and sees those
// codes itself.
func (c *Client) InspectPod(ctx context.Context, uid string, track kubecontainer.CallTracker) kubecontainer.PodInspection {
	p := &podInspection{c: c, ctx: ctx, track: track, ins: kubecontainer.PodInspection{UID: uid, Start: time.Now()}}
	p.run(uid)
	p.ins.Duration = time.Since(p.ins.Start)
	return p.ins
}

type podInspection struct {
	c     *Client
	ctx   context.Context
	track kubecontainer.CallTracker
	ins   kubecontainer.PodInspection
}

// listedSandbox is what the filtered sandbox list keeps of each sandbox.
type listedSandbox struct {
	id              string
	created         int64
	name, namespace string
}

func (p *podInspection) run(uid string) {
	// 1. ListPodSandbox, filtered by the pod's uid.
	var sandboxes []listedSandbox
	if !p.call(kubecontainer.RPCListPodSandbox, "", func(ctx context.Context) error {
		return p.c.listFiltered(ctx, "sandboxes", statusFilter(typeSandbox, uid), func(e *Entry) {
			// cri-dockerd skips what it cannot convert; the kubelet never
			// hears of it.
			if m := e.Sandbox; m != nil {
				sandboxes = append(sandboxes, listedSandbox{id: m.Id, created: m.CreatedAt, name: m.Metadata.Name, namespace: m.Metadata.Namespace})
			}
		})
	}) {
		return
	}
	// The kubelet sorts them newest first (getSandboxIDByPodUID); Docker's
	// own order, newest first too at a finer grain, breaks ties.
	sort.SliceStable(sandboxes, func(i, j int) bool { return sandboxes[i].created > sandboxes[j].created })
	if len(sandboxes) > 0 {
		p.ins.Namespace, p.ins.Name = sandboxes[0].namespace, sandboxes[0].name
	}

	// 2. PodSandboxStatus of each, newest first; Sandboxes are those
	// inspected, as the CRI client's.
	for _, s := range sandboxes {
		p.ins.Sandboxes = append(p.ins.Sandboxes, s.id)
		if !p.call(kubecontainer.RPCPodSandboxStatus, s.id, func(ctx context.Context) error {
			return p.c.sandboxStatus(ctx, s.id)
		}) {
			return
		}
	}

	// 3. ListContainers, filtered by the pod's uid, in Docker's order
	// (newest first), which cri-dockerd keeps and the kubelet walks.
	if !p.call(kubecontainer.RPCListContainers, "", func(ctx context.Context) error {
		return p.c.listFiltered(ctx, "containers", statusFilter(typeContainer, uid), func(e *Entry) {
			if e.Container == nil {
				return
			}
			p.ins.Containers = append(p.ins.Containers, e.Container.Id)
			if p.ins.Name == "" {
				p.ins.Namespace, p.ins.Name = e.Docker.Labels[podNamespaceLabel], e.Docker.Labels[podNameLabel]
			}
		})
	}) {
		return
	}

	// 4. ContainerStatus of each.
	for _, id := range p.ins.Containers {
		if !p.call(kubecontainer.RPCContainerStatus, id, func(ctx context.Context) error {
			return p.c.containerStatus(ctx, id)
		}) {
			return
		}
	}
}

// call makes one CRI call's Docker calls within the per-call deadline,
// records it and tells the tracker. It reports whether the inspection goes
// on: after a success, or a NotFound (the item went after it was listed).
func (p *podInspection) call(rpc, id string, fn func(ctx context.Context) error) bool {
	if p.track.Begin != nil {
		p.track.Begin(rpc, id)
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.c.cfg.Timeout)
	sc := kubecontainer.StatusCall{RPC: rpc, ID: id, Start: time.Now()}
	err := fn(ctx)
	sc.Duration = time.Since(sc.Start)
	if err != nil {
		// An answer cut off by the deadline can fail in the decoder or the
		// connection; the kubelet's call failed with the deadline.
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = fmt.Errorf("%w: %w", cerr, err)
		}
		err = classify(err)
	}
	cancel()
	sc.Err = err
	p.ins.Calls = append(p.ins.Calls, sc)
	if p.track.End != nil {
		p.track.End(sc)
	}
	if err == nil || kubecontainer.ErrorCode(err) == kubecontainer.CodeNotFound {
		return true
	}
	p.ins.Err, p.ins.Failed = err, sc
	return false
}

// listFiltered is one filtered container list, decoded one item at a time
// under the same receive limit as the relist's list.
func (c *Client) listFiltered(ctx context.Context, what, filter string, fn func(*Entry)) error {
	if err := c.streamList(ctx, filter, fn); err != nil {
		return fmt.Errorf("list %s of the pod on docker at %s: %w", what, c.cfg.Host, err)
	}
	return nil
}

// sandboxStatus makes the Docker calls of cri-dockerd's PodSandboxStatus.
func (c *Client) sandboxStatus(ctx context.Context, id string) error {
	r, err := c.inspect(ctx, "sandbox", id)
	if err != nil {
		return err
	}
	if _, err := ParseSandboxName(r.Name); err != nil {
		return fmt.Errorf("pod sandbox %s: %w", id, err)
	}
	if r.NetworkSettings == nil || r.HostConfig == nil || r.HostConfig.NetworkMode == "host" || r.State == nil || !r.State.Running {
		return nil
	}
	// The CNI plugin's GetNetNS: the same inspect again. cri-dockerd falls
	// back to the address Docker reports when the plugin fails, so only the
	// deadline makes it an error of the call.
	if _, err := c.inspect(ctx, "sandbox", id); err != nil && ctx.Err() != nil {
		return err
	}
	return nil
}

// containerStatus makes the Docker calls of cri-dockerd's ContainerStatus.
func (c *Client) containerStatus(ctx context.Context, id string) error {
	r, err := c.inspect(ctx, "container", id)
	if err != nil {
		return err
	}
	if r.Image != "" {
		_, err := c.api.ImageInspect(ctx, r.Image)
		switch {
		case err == nil, errdefs.IsNotFound(err) && ctx.Err() == nil:
			// cri-dockerd reports a container whose image is gone.
		default:
			return fmt.Errorf("inspect image %s of container %s on docker at %s: %w", r.Image, id, c.cfg.Host, malformed(err))
		}
	}
	if _, err := ParseContainerName(r.Name); err != nil {
		return fmt.Errorf("container %s: %w", id, err)
	}
	return nil
}

// inspect is GET /containers/<id>/json, its answer bounded by the client's
// receive limit like every other.
func (c *Client) inspect(ctx context.Context, what, id string) (container.InspectResponse, error) {
	r, err := c.api.ContainerInspect(ctx, id)
	if err != nil {
		return r, fmt.Errorf("inspect %s %s on docker at %s: %w", what, id, c.cfg.Host, malformed(err))
	}
	if r.ContainerJSONBase == nil {
		return r, fmt.Errorf("inspect %s %s on docker at %s: malformed answer: no container in it", what, id, c.cfg.Host)
	}
	return r, nil
}

// malformed says so of an answer that is not the JSON the API promises.
func malformed(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syn) || errors.As(err, &typ) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("malformed answer: %w", err)
	}
	return err
}
