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

package cri_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/internal/fakecri"
	"github.com/pleg-exporter/pleg_exporter/runtime/cri"
)

func benchSpec(n int) fakecri.Spec { return fakecri.BenchSpec(n, 1600) }

var benchSizes = []int{1000, 10000, 100000}

func benchServer(b *testing.B, n int) *fakecri.Server {
	b.Helper()
	srv, err := fakecri.Start(filepath.Join(b.TempDir(), "cri.sock"), fakecri.Options{MaxSendBytes: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Stop)
	srv.SetPopulation(fakecri.Generate(benchSpec(n)))
	return srv
}

// BenchmarkRelist is the exporter's whole relist cycle: both lists, state
// counting and payload accounting.
func BenchmarkRelist(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("containers=%d", n), func(b *testing.B) {
			srv := benchServer(b, n)
			c, err := cri.New(cri.Config{Endpoint: srv.Endpoint(), MaxRecvBytes: 1 << 30, Timeout: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if s := c.Relist(ctx); s.Err != nil || !s.Counted {
					b.Fatal(s.Err)
				}
			}
		})
	}
}

// BenchmarkBareLists is what a minimal CRI client pays for the same two
// round trips: ListPodSandbox and ListContainers decoded into messages.
func BenchmarkBareLists(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("containers=%d", n), func(b *testing.B) {
			srv := benchServer(b, n)
			cc, err := grpc.NewClient(srv.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<30)))
			if err != nil {
				b.Fatal(err)
			}
			defer cc.Close()
			rs := runtimeapi.NewRuntimeServiceClient(cc)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); err != nil {
					b.Fatal(err)
				}
				if _, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
