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

package cri

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// allowedMethods are the only CRI calls that may leave the process: lists,
// status reads and version. Anything else (create, stop, remove, exec, …) is
// refused in the client before a byte is sent, so a bug in the exporter can
// never change the node.
var allowedMethods = map[string]bool{
	runtimeapi.RuntimeService_Version_FullMethodName:            true,
	runtimeapi.RuntimeService_Status_FullMethodName:             true,
	runtimeapi.RuntimeService_ListPodSandbox_FullMethodName:     true,
	runtimeapi.RuntimeService_StreamPodSandboxes_FullMethodName: true,
	runtimeapi.RuntimeService_ListContainers_FullMethodName:     true,
	runtimeapi.RuntimeService_StreamContainers_FullMethodName:   true,
	runtimeapi.RuntimeService_PodSandboxStatus_FullMethodName:   true,
	runtimeapi.RuntimeService_ContainerStatus_FullMethodName:    true,
}

// removalMethods are what the gc command's client adds to allowedMethods:
// the two removals the kubelet's container GC makes. Neither client can
// stop, create or exec; but the CRI's removals stop what they remove (a
// running container, the containers of a sandbox), which is why the gc
// client asks each item's state before removing it (remover.go).
var removalMethods = map[string]bool{
	runtimeapi.RuntimeService_RemoveContainer_FullMethodName:  true,
	runtimeapi.RuntimeService_RemovePodSandbox_FullMethodName: true,
}

// Allowed reports whether a full gRPC method name passes the daemon's
// (read-only) allow-list.
func Allowed(method string) bool { return allowedMethods[method] }

// AllowedForGC reports whether a full gRPC method name passes the gc
// command's allow-list.
func AllowedForGC(method string) bool { return allowedMethods[method] || removalMethods[method] }

// allowList is the rule a client's interceptors apply to every call.
type allowList struct {
	allow func(method string) bool
	who   string // in the refusal: what the client is
}

var (
	readOnly  = allowList{allow: Allowed, who: "pleg_exporter is read-only"}
	gcRemover = allowList{allow: AllowedForGC, who: "pleg_exporter gc may only list, read status and remove containers and sandboxes"}
)

func (a allowList) refuse(method string) error {
	return status.Errorf(codes.PermissionDenied, "%s: %s is not on its allow-list and was not sent", a.who, method)
}

func (a allowList) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if !a.allow(method) {
		return a.refuse(method)
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (a allowList) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if !a.allow(method) {
		return nil, a.refuse(method)
	}
	return streamer(ctx, desc, cc, method, opts...)
}
