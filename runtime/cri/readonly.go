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

// Allowed reports whether a full gRPC method name passes the allow-list.
func Allowed(method string) bool { return allowedMethods[method] }

func refuse(method string) error {
	return status.Errorf(codes.PermissionDenied, "pleg_exporter is read-only: %s is not on its allow-list and was not sent", method)
}

func readOnlyUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if !allowedMethods[method] {
		return refuse(method)
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func readOnlyStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if !allowedMethods[method] {
		return nil, refuse(method)
	}
	return streamer(ctx, desc, cc, method, opts...)
}
