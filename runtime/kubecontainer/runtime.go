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

package kubecontainer

import (
	"context"
	"errors"
	"regexp"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Runtime is a node's container runtime as the exporter reads it: read-only,
// through the same list calls the kubelet's generic PLEG makes. The CRI and
// Docker adapters implement it, and so do the runtime/detect wrappers.
// Implementations must be safe to call from one goroutine at a time; the
// relister never overlaps relists.
type Runtime interface {
	// Relist lists every sandbox and container once and returns the
	// aggregates. It always returns a snapshot; failures are in its fields.
	Relist(ctx context.Context) *Snapshot
	// Inventory lists every sandbox and container with its identity, past
	// the kubelet's limit too, and probes the status calls of the suspects:
	// the input of a one-shot report. An error means the runtime could not
	// be listed at all.
	Inventory(ctx context.Context) (*Inventory, error)
	// Info asks the runtime who it is. Called after (re)connecting.
	Info(ctx context.Context) (Info, error)
	Close() error
}

// ErrPayloadTooLarge marks a list answer that the runtime did send but that
// is larger than the kubelet's receive limit: the kubelet would fail with
// ResourceExhausted where we succeeded.
var ErrPayloadTooLarge = errors.New("response larger than the kubelet's gRPC receive limit")

// PayloadTooLargeError carries the size of an answer the kubelet would reject.
type PayloadTooLargeError struct {
	RPC   string
	Size  int64
	Limit int64
}

func (e *PayloadTooLargeError) Error() string {
	return e.RPC + ": " + strconv.FormatInt(e.Size, 10) + " bytes is larger than the kubelet's receive limit of " +
		strconv.FormatInt(e.Limit, 10) + " bytes"
}

func (e *PayloadTooLargeError) Is(target error) bool { return target == ErrPayloadTooLarge }

// sizeRE matches grpc-go's "trying to send message larger than max (16783506
// vs. 16777216)" (server side) and "received message larger than max (…)"
// (client side).
var sizeRE = regexp.MustCompile(`message larger than max \((\d+) vs\. (\d+)\)`)

// ParseMessageSize extracts the actual and maximum sizes from a gRPC
// ResourceExhausted message. ok is false when the text carries no sizes.
func ParseMessageSize(msg string) (size, limit int64, ok bool) {
	m := sizeRE.FindStringSubmatch(msg)
	if m == nil {
		return 0, 0, false
	}
	size, err1 := strconv.ParseInt(m[1], 10, 64)
	limit, err2 := strconv.ParseInt(m[2], 10, 64)
	if err1 != nil || err2 != nil || size < 0 || limit < 0 {
		return 0, 0, false
	}
	return size, limit, true
}

// ErrorCode classifies an error for the `code` label of
// pleg_relist_errors_total: the gRPC code name for CRI errors, a small fixed
// set of classes otherwise, so the label stays bounded.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	if errors.Is(err, ErrPayloadTooLarge) {
		return codes.ResourceExhausted.String()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return codes.DeadlineExceeded.String()
	}
	if errors.Is(err, context.Canceled) {
		return codes.Canceled.String()
	}
	var coded interface{ Code() string }
	if errors.As(err, &coded) {
		return coded.Code()
	}
	if s, ok := status.FromError(err); ok {
		return s.Code().String()
	}
	return codes.Unknown.String()
}
