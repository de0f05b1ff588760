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
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
)

// BenchmarkDockerList is one Docker relist of 1k, 10k and 50k containers
// served over a unix socket: decode=stream is the exporter's list, one
// container at a time; decode=whole is what it did before, moby's
// ContainerList decoding the whole answer, then the same conversion. Beside
// B/op it reports peak-heap-B, the most heap in objects (live, and garbage
// the collector has not reached yet) while listing, above what was live
// before; the answer is served from a file, off the heap.
func BenchmarkDockerList(b *testing.B) {
	for _, n := range []int{1000, 10000, 50000} {
		body, _ := synthContainers(n)
		// One server for both, from a file: the answer is not on the heap.
		host := serveList(b, body, false)
		b.Logf("%d containers: %d bytes of answer", n, len(body))
		body = nil
		b.Run(fmt.Sprintf("containers=%d/decode=stream", n), func(b *testing.B) {
			c, err := New(Config{Host: host, Timeout: time.Minute, MaxBytes: 1 << 30})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			measureList(b, func(ctx context.Context) (*View, error) { return c.List(ctx) })
		})
		b.Run(fmt.Sprintf("containers=%d/decode=whole", n), func(b *testing.B) {
			api, err := client.NewClientWithOpts(client.WithHost(host), client.WithAPIVersionNegotiation())
			if err != nil {
				b.Fatal(err)
			}
			defer api.Close()
			measureList(b, func(ctx context.Context) (*View, error) { return wholeList(ctx, api) })
		})
	}
}

// wholeList is the list as it was: the whole answer decoded into moby's
// summaries, then converted.
func wholeList(ctx context.Context, api *client.Client) (*View, error) {
	list, err := api.ContainerList(ctx, container.ListOptions{All: true})
	if err != nil {
		return nil, err
	}
	v := newView()
	for i := range list {
		d := &list[i]
		s := Summary{ID: d.ID, Names: d.Names, Image: d.Image, ImageID: d.ImageID, Created: d.Created,
			State: string(d.State), Status: d.Status, Labels: d.Labels}
		e := convert(&s)
		v.add(&e)
	}
	return v, nil
}

func measureList(b *testing.B, list func(context.Context) (*View, error)) {
	ctx := context.Background()
	if _, err := list(ctx); err != nil { // warm: version negotiation, connection
		b.Fatal(err)
	}
	runtime.GC()
	debug.FreeOSMemory()
	// The process's resident high-water mark, reset here (Linux: writing 5
	// to clear_refs), read after the loop: what a memory limit would see,
	// the Go runtime's overhead and returned-but-not-yet-released pages
	// included, which the heap sample below leaves out.
	rssReset := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	base := sample[0].Value.Uint64()
	var peak uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if v, err := list(ctx); err != nil || v.ContainersListed == 0 {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	close(done)
	wg.Wait()
	if hwm, ok := peakRSS(); rssReset && ok {
		b.ReportMetric(float64(hwm), "peak-rss-B")
	}
	if peak > base {
		b.ReportMetric(float64(peak-base), "peak-heap-B")
	} else {
		b.ReportMetric(0, "peak-heap-B")
	}
}

// peakRSS is VmHWM from /proc/self/status, in bytes.
func peakRSS() (uint64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kib, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kib << 10, err == nil
		}
	}
	return 0, false
}
