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
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
)

// countingProxy forwards a unix socket to the daemon's and counts the bytes
// the client writes towards the daemon, before they are forwarded: the proof
// that a refused call sent nothing, independent of the guard's own word.
type countingProxy struct {
	Endpoint string
	sent     atomic.Int64
}

func startProxy(t testing.TB, upstream string) *countingProxy {
	t.Helper()
	dir, err := os.MkdirTemp("", "pleg-proxy")
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("unix", filepath.Join(dir, "p.sock"))
	if err != nil {
		t.Fatal(err)
	}
	p := &countingProxy{Endpoint: "unix://" + filepath.Join(dir, "p.sock")}
	var mu sync.Mutex
	var open []net.Conn
	go func() {
		for {
			down, err := lis.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("unix", upstream)
			if err != nil {
				down.Close()
				continue
			}
			mu.Lock()
			open = append(open, down, up)
			mu.Unlock()
			go func() {
				io.Copy(up, countingReader{down, &p.sent})
				up.Close()
			}()
			go func() {
				io.Copy(down, up)
				down.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		lis.Close()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		os.RemoveAll(dir)
	})
	return p
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// attack is one way of reaching past the exporter's calls to change a
// container through the moby client the exporter holds.
type attack struct {
	name string
	do   func(ctx context.Context) error
}

// attacks lists what moby offers beyond plain GETs: hijacked streams
// (attach, exec), a GET asking for an upgrade, through the client and on a
// raw connection of its dialer, and plain writes.
func attacks(raw *client.Client, id string) []attack {
	execID := strings.Repeat("e", 64) // creating one is refused too
	hijacked := func(resp interface{ Close() }, err error) error {
		if err == nil {
			resp.Close()
		}
		return err
	}
	upgradeHead := func(method string) string {
		return method + " /v" + raw.ClientVersion() + "/containers/" + id + "/attach?stream=1&stdin=1&stdout=1&stderr=1 HTTP/1.1\r\n" +
			"Host: " + client.DummyHost + "\r\nUpgrade: tcp\r\nConnection: Upgrade\r\n\r\n"
	}
	return []attack{
		{"ContainerAttach", func(ctx context.Context) error {
			resp, err := raw.ContainerAttach(ctx, id, container.AttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
			return hijacked(&resp, err)
		}},
		{"ContainerExecCreate", func(ctx context.Context) error {
			_, err := raw.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: []string{"/bin/touch", "/pwned"}})
			return err
		}},
		{"ContainerExecAttach", func(ctx context.Context) error {
			resp, err := raw.ContainerExecAttach(ctx, execID, container.ExecAttachOptions{})
			return hijacked(&resp, err)
		}},
		{"ContainerExecStart", func(ctx context.Context) error {
			return raw.ContainerExecStart(ctx, execID, container.ExecStartOptions{})
		}},
		{"DialHijack", func(ctx context.Context) error {
			conn, err := raw.DialHijack(ctx, "/containers/"+id+"/attach?stream=1&stdin=1", "tcp", nil)
			if err == nil {
				conn.Close()
			}
			return err
		}},
		{"GET with Upgrade through the client", func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet,
				"http://"+client.DummyHost+"/v"+raw.ClientVersion()+"/containers/"+id+"/attach?stream=1&stdin=1&stdout=1", nil)
			if err != nil {
				return err
			}
			req.Header.Set("Upgrade", "tcp")
			req.Header.Set("Connection", "Upgrade")
			resp, err := raw.HTTPClient().Do(req)
			if err == nil {
				resp.Body.Close()
				return fmt.Errorf("answered %s", resp.Status)
			}
			return err
		}},
		{"GET with Upgrade on a connection of the client's dialer", func(ctx context.Context) error {
			return onDialerConn(ctx, raw, upgradeHead(http.MethodGet))
		}},
		{"POST on a connection of the client's dialer", func(ctx context.Context) error {
			return onDialerConn(ctx, raw, "POST /v"+raw.ClientVersion()+"/containers/"+id+"/kill HTTP/1.1\r\nHost: "+client.DummyHost+"\r\nContent-Length: 0\r\n\r\n")
		}},
		{"POST through the client", func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+client.DummyHost+"/v"+raw.ClientVersion()+"/containers/"+id+"/stop", nil)
			if err != nil {
				return err
			}
			resp, err := raw.HTTPClient().Do(req)
			if err == nil {
				resp.Body.Close()
				return fmt.Errorf("answered %s", resp.Status)
			}
			return err
		}},
		{"ContainerKill", func(ctx context.Context) error { return raw.ContainerKill(ctx, id, "KILL") }},
	}
}

// onDialerConn writes a request on a connection of the client's own dialer,
// the one moby hijacks through, and waits for the daemon's first byte of
// answer, so that what was sent has been counted when it returns.
func onDialerConn(ctx context.Context, raw *client.Client, request string) error {
	conn, err := raw.Dialer()(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if d, ok := ctx.Deadline(); ok {
		conn.SetDeadline(d)
	}
	if _, err := io.WriteString(conn, request); err != nil {
		return err
	}
	var b [1]byte
	_, err = conn.Read(b[:])
	return err
}

// tryAttacks runs every attack and checks that each was refused with the
// read-only error before a byte reached the daemon.
func tryAttacks(t *testing.T, c *Client, p *countingProxy, id string) {
	t.Helper()
	raw, ok := any(c.api).(*client.Client)
	if !ok {
		t.Fatalf("the exporter's engine is a %T", c.api)
	}
	for _, a := range attacks(raw, id) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		before := p.sent.Load()
		err := a.do(ctx)
		cancel()
		sent := p.sent.Load() - before
		var na *ErrNotAllowed
		if !errors.As(err, &na) {
			t.Errorf("%s: err = %v, want a read-only refusal", a.name, err)
		}
		if sent != 0 {
			t.Errorf("%s: %d bytes reached the daemon", a.name, sent)
		}
		t.Logf("%s: %d bytes sent; %v", a.name, sent, err)
	}
}

func TestReadOnlyRefusesHijackAndUpgrade(t *testing.T) {
	host, writes := fakeDaemon(t)
	p := startProxy(t, strings.TrimPrefix(host, "unix://"))
	c, err := New(Config{Host: p.Endpoint, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Negotiate the API version first: moby pings before its first call.
	if _, err := c.Info(context.Background()); err != nil {
		t.Fatal(err)
	}
	tryAttacks(t, c, p, "00000000000000000000000000000000000000000000000000000000000d0003")
	if writes.Load() != 0 {
		t.Errorf("%d writing requests reached the daemon", writes.Load())
	}
	// The refusals closed only their own connections: the exporter's
	// calls still go through.
	before := p.sent.Load()
	if snap := c.Relist(context.Background()); snap.Err != nil || !snap.Counted {
		t.Fatalf("relist after the refusals: %v", snap.Err)
	}
	if p.sent.Load() == before {
		t.Error("the relist sent nothing: is the proxy counting?")
	}
}
