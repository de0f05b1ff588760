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
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// The exporter must not be able to change the daemon it watches, whatever
// code path of the moby client a future change reaches. Two guards see to it:
//
//   - readOnlyTransport, around every request of the http.Client, refuses
//     with a clear ErrNotAllowed anything but a plain GET or HEAD, and bounds
//     every answer's body;
//   - readOnlyConn, around every connection the http.Transport dials, reads
//     each request head before a byte of it reaches the socket and closes the
//     connection on anything but a plain GET or HEAD. moby's hijacked calls
//     (attach, exec start, DialHijack) do not go through the http.Client: they
//     dial through the *http.Transport's DialContext and write the request
//     themselves (client/hijack.go, Client.dialer), so only this guard sees
//     them.

// ErrNotAllowed is returned for any request that could change the daemon.
type ErrNotAllowed struct {
	Method, Path string
	Reason       string // what besides the method made it a write; empty for the method
}

func (e *ErrNotAllowed) Error() string {
	why := ""
	if e.Reason != "" {
		why = " (" + e.Reason + ")"
	}
	return fmt.Sprintf("pleg_exporter is read-only: %s %s is not allowed%s and was not sent", e.Method, e.Path, why)
}

// Code classifies the refusal for pleg_relist_errors_total.
func (e *ErrNotAllowed) Code() string { return "PermissionDenied" }

// TooLargeError is an answer the exporter stopped reading at its receive
// limit (--runtime.max-recv-bytes), the Docker counterpart of the CRI
// client's gRPC limit.
type TooLargeError struct {
	Path  string
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("answer to GET %s is larger than the receive limit of %d bytes (--runtime.max-recv-bytes); stopped reading it", e.Path, e.Limit)
}

// Code classifies the error for pleg_relist_errors_total as the CRI path
// does an answer over its gRPC limit.
func (e *TooLargeError) Code() string { return kubecontainer.CodeResourceExhausted }

// policy is the rule both guards of one client apply. The daemon's clients
// are read-only; the gc command's may also remove one container by its full
// id, the request moby's ContainerRemove makes with RemoveVolumes and
// without Force (so a container that is running is refused by the daemon,
// never killed).
type policy struct {
	removals bool
}

var (
	readOnlyPolicy = policy{}
	gcPolicy       = policy{removals: true}
)

// removePath is DELETE /v<api>/containers/<64 hex> (the version prefix is
// optional in the Engine API).
var removePath = regexp.MustCompile(`^(/v[0-9]+\.[0-9]+)?/containers/[0-9a-f]{64}$`)

// refuse says why a request may not leave the process, or nil: GET or HEAD
// (or, for the gc command, the one DELETE), no body, no protocol upgrade.
func (p policy) refuse(method string, u *url.URL, h http.Header, contentLength int64, chunked bool) error {
	na := &ErrNotAllowed{Method: method, Path: u.Path}
	switch {
	case method == http.MethodDelete && p.removals:
		switch {
		case !removePath.MatchString(u.Path):
			na.Reason = "only the removal of one container by its full id is allowed"
			return na
		case u.RawQuery != "v=1" && u.RawQuery != "":
			na.Reason = "query " + strconv.Quote(u.RawQuery) + " (force is never allowed)"
			return na
		}
	case method != http.MethodGet && method != http.MethodHead:
		return na
	}
	switch {
	case len(h.Values("Upgrade")) > 0:
		na.Reason = "protocol upgrade"
	case upgradeToken(h.Values("Connection")):
		na.Reason = "connection upgrade"
	case contentLength != 0 || chunked:
		na.Reason = "request body"
	default:
		return nil
	}
	return na
}

// upgradeToken reports whether a Connection header asks for an upgrade. It
// matches the word anywhere, more than the token rule: refusing too much is
// the safe side.
func upgradeToken(values []string) bool {
	for _, v := range values {
		if strings.Contains(strings.ToLower(v), "upgrade") {
			return true
		}
	}
	return false
}

// readOnlyTransport lets only plain GET and HEAD requests leave the process
// (and the removals of the gc policy) and stops reading any answer past
// maxBytes.
type readOnlyTransport struct {
	next     http.RoundTripper
	maxBytes int64
	policy   policy
}

func (t readOnlyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	hasBody := req.Body != nil && req.Body != http.NoBody
	length := req.ContentLength
	if hasBody && length == 0 {
		length = -1 // unknown length: a body all the same
	}
	if err := t.policy.refuse(req.Method, req.URL, req.Header, length, len(req.TransferEncoding) > 0); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	tooLarge := &TooLargeError{Path: req.URL.Path, Limit: t.maxBytes}
	// A HEAD answer announces the length of a body it does not send.
	if req.Method != http.MethodHead && resp.ContentLength > t.maxBytes {
		resp.Body.Close()
		return nil, tooLarge
	}
	resp.Body = &cappedBody{ReadCloser: resp.Body, left: t.maxBytes, err: tooLarge}
	return resp, nil
}

// cappedBody fails a read that goes past the limit, so no caller (moby's
// whole-answer decoders included) can be made to hold more than the limit.
type cappedBody struct {
	io.ReadCloser
	left int64 // bytes still allowed
	err  error
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, b.err
	}
	// One byte more than allowed tells a body of exactly the limit from a
	// larger one.
	// (Compared as len-1 > left: left+1 overflows at the largest limit.)
	if int64(len(p))-1 > b.left {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n - 1, b.err
	}
	return n, err
}

// maxHead bounds the request head readOnlyConn holds while it decides; the
// exporter's requests are a few hundred bytes.
const maxHead = 64 << 10

// guardDial wraps a dialer so that every connection it makes is a
// readOnlyConn applying p.
func guardDial(dial func(ctx context.Context, network, addr string) (net.Conn, error), p policy) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &readOnlyConn{Conn: conn, policy: p}, nil
	}
}

// readOnlyConn holds what is written to it until a whole request head has
// arrived, then sends the head if it is a plain GET or HEAD, and otherwise
// closes the connection without having sent a byte of it. The requests it
// lets through carry no body, so the byte stream is nothing but heads, each
// one checked. It embeds the net.Conn interface, not the concrete
// connection, so that no other way of writing (io.ReaderFrom's splice,
// CloseWrite) is promoted past Write.
type readOnlyConn struct {
	net.Conn
	policy  policy
	mu      sync.Mutex
	pending []byte // the head being written, not yet sent
	err     error  // the refusal that closed the connection
}

func (c *readOnlyConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	c.pending = append(c.pending, p...)
	for {
		end := bytes.Index(c.pending, []byte("\r\n\r\n"))
		if end < 0 {
			if len(c.pending) > maxHead {
				return 0, c.fail(&ErrNotAllowed{Method: "?", Path: "?", Reason: "request head over " + strconv.Itoa(maxHead) + " bytes"})
			}
			return len(p), nil
		}
		head := c.pending[:end+4]
		if err := c.policy.checkHead(head); err != nil {
			return 0, c.fail(err)
		}
		if _, err := c.Conn.Write(head); err != nil {
			c.pending = nil
			return 0, err
		}
		c.pending = c.pending[end+4:]
		if len(c.pending) == 0 {
			c.pending = nil
			return len(p), nil
		}
	}
}

// fail closes the connection for good: nothing pending is sent.
func (c *readOnlyConn) fail(err error) error {
	c.err, c.pending = err, nil
	c.Conn.Close()
	return err
}

// checkHead parses one request head with the same parser the daemon's Go
// HTTP server uses and applies the read-only rule to it. The head must be
// exactly one request: Go's parser also ends a head at a bare "\n\n", so a
// head written with bare line feeds could hide a second request behind the
// first, which the daemon would then read and run.
func (p policy) checkHead(head []byte) error {
	malformed := func(why string) error {
		method, path, _ := strings.Cut(string(head[:min(len(head), 64)]), " ")
		path, _, _ = strings.Cut(path, " ")
		return &ErrNotAllowed{Method: method, Path: path, Reason: "malformed request: " + why}
	}
	for i, b := range head {
		if b == '\n' && (i == 0 || head[i-1] != '\r') {
			return malformed("a line ends without CRLF")
		}
	}
	r := bytes.NewReader(head)
	br := bufio.NewReader(r)
	req, err := http.ReadRequest(br)
	if err != nil {
		return malformed(err.Error())
	}
	if r.Len() != 0 || br.Buffered() != 0 {
		return malformed("more than one request head")
	}
	return p.refuse(req.Method, req.URL, req.Header, req.ContentLength, len(req.TransferEncoding) > 0)
}
