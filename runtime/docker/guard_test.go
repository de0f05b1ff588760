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
	"bytes"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"testing"
)

// recordingConn is the socket under a readOnlyConn: it keeps what reached it.
type recordingConn struct {
	net.Conn // nil: only Write and Close are called
	sent     bytes.Buffer
	closed   bool
}

func (c *recordingConn) Write(p []byte) (int, error) { return c.sent.Write(p) }
func (c *recordingConn) Close() error                { c.closed = true; return nil }

const okHead = "GET /v1.41/containers/json?all=1 HTTP/1.1\r\nHost: api.moby.localhost\r\nUser-Agent: Go-http-client/1.1\r\n\r\n"

func TestReadOnlyConn(t *testing.T) {
	for name, tc := range map[string]struct {
		writes []string
		sent   string // what must reach the socket
		refuse bool
	}{
		"GET":                 {writes: []string{okHead}, sent: okHead},
		"HEAD":                {writes: []string{"HEAD /_ping HTTP/1.1\r\nHost: x\r\n\r\n"}, sent: "HEAD /_ping HTTP/1.1\r\nHost: x\r\n\r\n"},
		"head split in bytes": {writes: strings.Split(okHead, ""), sent: okHead},
		"two GETs pipelined":  {writes: []string{okHead + okHead}, sent: okHead + okHead},
		"partial head only":   {writes: []string{"GET /version HTTP/1.1\r\nHost: x\r\n"}, sent: ""},
		"GET then POST in one write": {writes: []string{okHead + "POST /containers/x/kill HTTP/1.1\r\nHost: x\r\n\r\n"},
			sent: okHead, refuse: true},
		"POST":              {writes: []string{"POST /containers/x/kill HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"}, refuse: true},
		"DELETE":            {writes: []string{"DELETE /containers/x HTTP/1.1\r\nHost: x\r\n\r\n"}, refuse: true},
		"lower-case method": {writes: []string{"get /version HTTP/1.1\r\nHost: x\r\n\r\n"}, refuse: true},
		"GET with Upgrade":  {writes: []string{"GET /containers/x/attach/ws HTTP/1.1\r\nHost: x\r\nupgrade: websocket\r\n\r\n"}, refuse: true},
		"GET with Connection: keep-alive, Upgrade": {writes: []string{"GET /version HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Upgrade\r\n\r\n"}, refuse: true},
		"GET with a body":                          {writes: []string{"GET /version HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nPOST"}, refuse: true},
		"GET chunked":                              {writes: []string{"GET /version HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"}, refuse: true},
		"HTTP/2 preface":                           {writes: []string{"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"}, refuse: true},
		"not HTTP":                                 {writes: []string{"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n"}, refuse: true},
		"leading blank line":                       {writes: []string{"\r\n" + okHead}, refuse: true},
		"head over the bound":                      {writes: []string{"GET /version HTTP/1.1\r\nX: " + strings.Repeat("a", maxHead)}, refuse: true},
		"POST in small pieces":                     {writes: strings.Split("POST /containers/x/stop HTTP/1.1\r\nHost: x\r\n\r\n", ""), refuse: true},
		// Go's parser ends a head at a bare LF LF too: the POST behind it
		// must not ride along with the GET.
		"POST hidden behind bare line feeds": {writes: []string{"GET /_ping HTTP/1.1\nHost: x\n\nPOST /containers/x/kill HTTP/1.1\r\nHost: x\r\n\r\n"}, refuse: true},
		"bare line feeds":                    {writes: []string{"GET /_ping HTTP/1.1\nHost: x\r\n\r\n"}, refuse: true},
	} {
		t.Run(name, func(t *testing.T) {
			rec := &recordingConn{}
			c := &readOnlyConn{Conn: rec}
			var err error
			for _, w := range tc.writes {
				var n int
				if n, err = c.Write([]byte(w)); err != nil {
					break
				}
				if n != len(w) {
					t.Fatalf("wrote %d of %d bytes without an error", n, len(w))
				}
			}
			var na *ErrNotAllowed
			if tc.refuse != errors.As(err, &na) {
				t.Fatalf("err = %v, refuse = %v", err, tc.refuse)
			}
			if got := rec.sent.String(); got != tc.sent {
				t.Errorf("sent %q, want %q", got, tc.sent)
			}
			if tc.refuse {
				if !rec.closed {
					t.Error("connection left open after a refusal")
				}
				if _, err := c.Write([]byte(okHead)); err == nil || rec.sent.String() != tc.sent {
					t.Error("a refused connection took another request")
				}
			}
		})
	}
}

func TestReadOnlyTransport(t *testing.T) {
	sent := 0
	tr := readOnlyTransport{maxBytes: 1 << 20, next: roundTripFunc(func(*http.Request) (*http.Response, error) {
		sent++
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("{}"))}, nil
	})}
	req := func(method string, body io.Reader, h ...string) *http.Request {
		r, _ := http.NewRequest(method, "http://"+"api.moby.localhost/v1.41/containers/x/json", body)
		for i := 0; i < len(h); i += 2 {
			r.Header.Set(h[i], h[i+1])
		}
		return r
	}
	for name, r := range map[string]*http.Request{
		"POST":               req(http.MethodPost, nil),
		"PUT with a body":    req(http.MethodPut, strings.NewReader("{}")),
		"GET with a body":    req(http.MethodGet, strings.NewReader("{}")),
		"GET with Upgrade":   req(http.MethodGet, nil, "Upgrade", "tcp"),
		"Connection upgrade": req(http.MethodGet, nil, "Connection", "upgrade"),
	} {
		var na *ErrNotAllowed
		if _, err := tr.RoundTrip(r); !errors.As(err, &na) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if sent != 0 {
		t.Errorf("%d refused requests were passed on", sent)
	}
	if _, err := tr.RoundTrip(req(http.MethodGet, nil)); err != nil || sent != 1 {
		t.Errorf("plain GET: %v", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestCappedBody(t *testing.T) {
	tooLarge := &TooLargeError{Path: "/containers/json", Limit: 10}
	for size, ok := range map[int]bool{0: true, 9: true, 10: true, 11: false, 1 << 20: false} {
		b := &cappedBody{ReadCloser: io.NopCloser(bytes.NewReader(make([]byte, size))), left: 10, err: tooLarge}
		got, err := io.ReadAll(b)
		if ok && (err != nil || len(got) != size) {
			t.Errorf("%d bytes: read %d, %v", size, len(got), err)
		}
		if !ok && (!errors.Is(err, tooLarge) || len(got) > 10) {
			t.Errorf("%d bytes: read %d, %v; want the limit's error after at most 10", size, len(got), err)
		}
	}
}

// The largest limit the flag accepts must not overflow the cap's arithmetic.
func TestCappedBodyAtTheLargestLimit(t *testing.T) {
	b := &cappedBody{ReadCloser: io.NopCloser(bytes.NewReader(make([]byte, 1000))), left: math.MaxInt64,
		err: &TooLargeError{Path: "/containers/json", Limit: math.MaxInt64}}
	if got, err := io.ReadAll(b); err != nil || len(got) != 1000 {
		t.Errorf("read %d, %v", len(got), err)
	}
}

// A HEAD answer's Content-Length announces a body that is not sent: it is
// not an answer over the limit.
func TestHeadIsNotTooLarge(t *testing.T) {
	tr := readOnlyTransport{maxBytes: 10, next: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, ContentLength: 1 << 20, Body: http.NoBody, Request: r}, nil
	})}
	req, _ := http.NewRequest(http.MethodHead, "http://docker/_ping", nil)
	if _, err := tr.RoundTrip(req); err != nil {
		t.Errorf("HEAD: %v", err)
	}
	req, _ = http.NewRequest(http.MethodGet, "http://docker/containers/json", nil)
	var large *TooLargeError
	if _, err := tr.RoundTrip(req); !errors.As(err, &large) {
		t.Errorf("GET announcing 1 MiB against a 10-byte limit: %v, want TooLargeError", err)
	}
}

// The gc command's guards let exactly one more request through: DELETE of
// one container by its full id, without force; the daemon's refuse it.
func TestGCPolicy(t *testing.T) {
	id := strings.Repeat("ab", 32)
	rm := "DELETE /v1.47/containers/" + id + "?v=1 HTTP/1.1\r\nHost: x\r\n\r\n"
	for name, tc := range map[string]struct {
		head    string
		gcAllow bool
	}{
		"remove with volumes":     {rm, true},
		"remove, no version":      {"DELETE /containers/" + id + " HTTP/1.1\r\nHost: x\r\n\r\n", true},
		"remove with force":       {"DELETE /v1.47/containers/" + id + "?force=1&v=1 HTTP/1.1\r\nHost: x\r\n\r\n", false},
		"remove by name":          {"DELETE /v1.47/containers/k8s_POD_x HTTP/1.1\r\nHost: x\r\n\r\n", false},
		"remove by short id":      {"DELETE /v1.47/containers/" + id[:12] + " HTTP/1.1\r\nHost: x\r\n\r\n", false},
		"remove an image":         {"DELETE /v1.47/images/" + id + " HTTP/1.1\r\nHost: x\r\n\r\n", false},
		"remove a path below":     {"DELETE /v1.47/containers/" + id + "/x HTTP/1.1\r\nHost: x\r\n\r\n", false},
		"remove with a body":      {"DELETE /v1.47/containers/" + id + " HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", false},
		"remove with Upgrade":     {"DELETE /v1.47/containers/" + id + " HTTP/1.1\r\nHost: x\r\nUpgrade: tcp\r\n\r\n", false},
		"kill":                    {"POST /v1.47/containers/" + id + "/kill HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", false},
		"prune":                   {"POST /v1.47/containers/prune HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", false},
		"list (reads still work)": {okHead, true},
	} {
		for _, p := range []policy{readOnlyPolicy, gcPolicy} {
			rec := &recordingConn{}
			c := &readOnlyConn{Conn: rec, policy: p}
			_, err := c.Write([]byte(tc.head))
			want := tc.gcAllow && (p.removals || strings.HasPrefix(tc.head, "GET"))
			if (err == nil) != want {
				t.Errorf("%s, removals=%v: err = %v, want allowed=%v", name, p.removals, err, want)
			}
			if !want && rec.sent.Len() != 0 {
				t.Errorf("%s, removals=%v: %q reached the socket", name, p.removals, rec.sent.String())
			}
		}
	}
	sent := 0
	tr := readOnlyTransport{maxBytes: 1 << 20, policy: gcPolicy, next: roundTripFunc(func(*http.Request) (*http.Response, error) {
		sent++
		return &http.Response{StatusCode: 204, Body: http.NoBody}, nil
	})}
	for url, ok := range map[string]bool{
		"http://docker/v1.47/containers/" + id + "?v=1":         true,
		"http://docker/v1.47/containers/" + id + "?force=1&v=1": false,
		"http://docker/v1.47/containers/" + id + "?force=true":  false,
		"http://docker/v1.47/volumes/" + id:                     false,
	} {
		req, _ := http.NewRequest(http.MethodDelete, url, nil)
		before := sent
		_, err := tr.RoundTrip(req)
		if (err == nil) != ok || (sent > before) != ok {
			t.Errorf("DELETE %s: err = %v, passed on = %v, want allowed=%v", url, err, sent > before, ok)
		}
	}
}
