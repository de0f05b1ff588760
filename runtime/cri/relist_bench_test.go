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
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/internal/fakecri"
	"github.com/pleg-exporter/pleg_exporter/runtime/cri"
)

// The list part of the relist with every feature on (namespace metrics,
// status probes, churn), the exporter's side only: a server that sends the
// same answer bytes every time, marshalled once, so that ns/op is the
// client's receive and scan and nothing of a runtime's work. The answers are
// containerd's when CRI_BENCH_ANSWERS names a directory where
// internal/cmd/listbench --dump wrote them (sandboxes.pb, containers.pb),
// else a fakecri population of the same shape: 3,000 never-started
// containers of ~1.8 KB in 30 pods.
//
// CRI_BENCH_ENDPOINT=unix:///path/containerd.sock runs BenchmarkRelistFeatures
// against that runtime instead (the runtime's own time included).
//
//	go test -run '^$' -bench 'RelistFeatures' -count 6 -cpuprofile cpu.out ./runtime/cri/

func featureConfig(endpoint string) cri.Config {
	return cri.Config{Endpoint: endpoint, MaxRecvBytes: 1 << 30, Timeout: time.Minute,
		NamespacesTop: 10, ProbeMax: 10, ProbeTimeout: 5 * time.Second}
}

func BenchmarkRelistFeatures(b *testing.B) {
	ep := os.Getenv("CRI_BENCH_ENDPOINT")
	if ep == "" {
		ep = rawServer(b)
	}
	c, err := cri.New(featureConfig(ep))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Info(ctx); err != nil { // the streaming probe, once, as the relister does
		b.Fatal(err)
	}
	var d time.Duration
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := c.Relist(ctx)
		if s.Err != nil || !s.Counted {
			b.Fatal(s.Err)
		}
		d += s.Duration
	}
	// What pleg_relist_last_duration_seconds would say: the two lists only.
	b.ReportMetric(float64(d.Nanoseconds())/float64(b.N), "list-ns/op")
	// The process's CPU, the server's replay included (the same bytes
	// written whatever the client does): on a shared machine the wall time
	// waits for the other tenants, the CPU time much less.
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// cpuTime is the process's user and system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// answers returns the two unfiltered answers as bytes.
func answers(b *testing.B) (sandboxes, containers []byte) {
	if d := os.Getenv("CRI_BENCH_ANSWERS"); d != "" {
		sb, err := os.ReadFile(filepath.Join(d, "sandboxes.pb"))
		if err != nil {
			b.Fatal(err)
		}
		ct, err := os.ReadFile(filepath.Join(d, "containers.pb"))
		if err != nil {
			b.Fatal(err)
		}
		return sb, ct
	}
	sbs, cts := fakecri.Generate(fakecri.Spec{Ready: 30, Created: 3000, PaddingBytes: 1000})
	sb, err := proto.Marshal(&runtimeapi.ListPodSandboxResponse{Items: sbs})
	if err != nil {
		b.Fatal(err)
	}
	ct, err := proto.Marshal(&runtimeapi.ListContainersResponse{Containers: cts})
	if err != nil {
		b.Fatal(err)
	}
	return sb, ct
}

// rawServer serves the answers as they are, and nothing but the list calls
// and Version; the streams are Unimplemented (containerd before 2.4).
func rawServer(b *testing.B) string {
	sb, ct := answers(b)
	version, _ := proto.Marshal(&runtimeapi.VersionResponse{RuntimeName: "raw", RuntimeVersion: "1", RuntimeApiVersion: "v1"})
	path := filepath.Join(b.TempDir(), "raw.sock")
	lis, err := net.Listen("unix", path)
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ForceServerCodecV2(rawBytesCodec{}), grpc.MaxSendMsgSize(1<<30),
		grpc.UnknownServiceHandler(func(_ any, st grpc.ServerStream) error {
			m, _ := grpc.MethodFromServerStream(st)
			var req rawBytes
			if err := st.RecvMsg(&req); err != nil {
				return err
			}
			switch m {
			case runtimeapi.RuntimeService_ListPodSandbox_FullMethodName:
				return st.SendMsg(rawBytes(sb))
			case runtimeapi.RuntimeService_ListContainers_FullMethodName:
				return st.SendMsg(rawBytes(ct))
			case runtimeapi.RuntimeService_Version_FullMethodName:
				return st.SendMsg(rawBytes(version))
			}
			return status.Error(codes.Unimplemented, m)
		}))
	go srv.Serve(lis)
	b.Cleanup(srv.Stop)
	return "unix://" + path
}

type rawBytes []byte

// rawBytesCodec sends rawBytes as they are and drops requests unread.
type rawBytesCodec struct{}

func (rawBytesCodec) Name() string { return "proto" }

func (rawBytesCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.(rawBytes))}, nil
}

func (rawBytesCodec) Unmarshal(mem.BufferSlice, any) error { return nil }
