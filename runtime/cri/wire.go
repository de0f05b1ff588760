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
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The list answers are counted straight from the wire: decoding 100k
// Container messages with their label maps only to count states cost more
// than the round trip itself (see docs/benchmarks.md). A list answer is one
// repeated field 1 of messages; we read each item's state (and, when asked,
// its namespace) and skip everything else.

// Field numbers of the CRI messages we read (cri-api runtime/v1 api.proto).
// The list answers and the streamed messages share one shape: items are the
// repeated field 1 (ListContainersResponse.containers,
// ListPodSandboxResponse.items, StreamContainersResponse.containers,
// StreamPodSandboxesResponse.pod_sandboxes).
const (
	listItemsField = 1

	containerIDField        = 1 // Container.id
	containerSandboxIDField = 2 // Container.pod_sandbox_id
	containerMetadataField  = 3 // Container.metadata (ContainerMetadata)
	containerStateField     = 6 // Container.state
	containerCreatedField   = 7 // Container.created_at
	containerLabelsField    = 8 // Container.labels (map<string,string>)
	containerNameField      = 1 // ContainerMetadata.name
	containerAttemptField   = 2 // ContainerMetadata.attempt

	sandboxIDField         = 1 // PodSandbox.id
	sandboxMetadataField   = 2 // PodSandbox.metadata (PodSandboxMetadata)
	sandboxStateField      = 3 // PodSandbox.state
	sandboxCreatedField    = 4 // PodSandbox.created_at
	metadataNameField      = 1 // PodSandboxMetadata.name
	metadataUIDField       = 2 // PodSandboxMetadata.uid
	metadataNamespaceField = 3 // PodSandboxMetadata.namespace
	metadataAttemptField   = 4 // PodSandboxMetadata.attempt

	mapKeyField   = 1
	mapValueField = 2
)

// Labels the kubelet puts on every container it creates.
const (
	namespaceLabel = "io.kubernetes.pod.namespace"
	podNameLabel   = "io.kubernetes.pod.name"
	podUIDLabel    = "io.kubernetes.pod.uid"
)

// Fields selects what the scanner reads of each item besides its state and
// size; everything else is skipped unread.
type Fields uint8

const (
	// FieldID reads the item's id.
	FieldID Fields = 1 << iota
	// FieldCreated reads the creation time.
	FieldCreated
	// FieldNamespace reads the pod's namespace (the sandbox's metadata, the
	// container's namespace label).
	FieldNamespace
	// FieldIdentity reads who the item belongs to: the container's name,
	// attempt and sandbox id and its pod's name and uid labels; the
	// sandbox's pod name, uid and attempt.
	FieldIdentity
	// FieldSandboxID reads only the container's sandbox id (part of
	// FieldIdentity, without its label scan).
	FieldSandboxID
)

// Item is what the scanner reads of one listed container or sandbox. The
// byte slices point into the receive buffer: valid only during the callback
// that gets the Item, copy what must outlive it.
type Item struct {
	// State is the enum value: 0 (CREATED, READY) when absent on the wire.
	State int32
	// Bytes is what the item adds to the answer: tag, length and body.
	Bytes     int
	ID        []byte // FieldID
	CreatedAt int64  // FieldCreated, Unix nanoseconds
	Namespace []byte // FieldNamespace
	// FieldIdentity. For a container: its name, the pod's name and uid from
	// the kubelet's labels, its sandbox. For a sandbox: Pod = Name = the
	// pod's name, PodUID its uid.
	Name      []byte
	Pod       []byte
	PodUID    []byte
	SandboxID []byte
	Attempt   uint32
}

// listSummary is the response type of a raw list call or of the messages of
// a raw stream: the scanner adds to it message by message.
type listSummary struct {
	sandboxes bool   // which message the items are
	fields    Fields // what to read of each item
	onItem    func(*Item)
	// Size is the serialized size of the answer (of all messages of a
	// stream).
	Size  int
	Items int
	// MaxMessage is the largest message of a stream (streamAll).
	MaxMessage int

	item Item // the scanner's scratch item
}

var errMalformed = errors.New("malformed list answer")

// scanList scans a whole answer held in memory (tests, fuzzing).
func scanList(b []byte, s *listSummary) error {
	return scanBuffers(mem.BufferSlice{mem.SliceBuffer(b)}, s)
}

// scanBuffers walks the answer as gRPC received it, a chain of frame
// buffers (16 KiB each, one per HTTP/2 data frame), without joining them:
// an item that lies within one buffer, most of them, is scanned where it
// is; only an item that straddles two is copied, into one reused scratch
// buffer. So the answer is held in memory once, as gRPC holds it, and each
// byte is read once. (gRPC frees the buffers when Unmarshal returns.)
func scanBuffers(data mem.BufferSlice, s *listSummary) error {
	c := wireCursor{bufs: data, left: data.Len()}
	s.Size += c.left
	var scratch []byte
	for c.left > 0 {
		tag, ok := c.uvarint()
		if !ok {
			return errMalformed
		}
		num, typ := protowire.DecodeTag(tag)
		if num < 1 {
			return errMalformed
		}
		switch typ {
		case protowire.VarintType:
			if _, ok := c.uvarint(); !ok {
				return errMalformed
			}
		case protowire.Fixed32Type:
			if !c.skip(4) {
				return errMalformed
			}
		case protowire.Fixed64Type:
			if !c.skip(8) {
				return errMalformed
			}
		case protowire.BytesType:
			l, ok := c.uvarint()
			if !ok || l > uint64(c.left) {
				return errMalformed
			}
			if num != listItemsField {
				c.skip(int(l))
				continue
			}
			body := c.take(int(l), &scratch)
			// One Item reused for every item: handed to a callback, a
			// fresh one would escape to the heap once per item.
			it := &s.item
			*it = Item{}
			var err error
			if s.sandboxes {
				err = scanSandbox(body, s.fields, it)
			} else {
				err = scanContainer(body, s.fields, it)
			}
			if err != nil {
				return err
			}
			it.Bytes = protowire.SizeVarint(tag) + protowire.SizeVarint(l) + int(l)
			s.Items++
			if s.onItem != nil {
				s.onItem(it)
			}
		default:
			return errMalformed
		}
	}
	return nil
}

// wireCursor reads a BufferSlice front to back.
type wireCursor struct {
	bufs mem.BufferSlice
	next int    // the buffer after cur
	cur  []byte // what is unread of the current buffer
	left int    // bytes unread in all
}

// more makes cur non-empty unless everything was read.
func (c *wireCursor) more() bool {
	for len(c.cur) == 0 && c.next < len(c.bufs) {
		c.cur = c.bufs[c.next].ReadOnlyData()
		c.next++
	}
	return len(c.cur) > 0
}

func (c *wireCursor) uvarint() (uint64, bool) {
	c.more()
	if len(c.cur) >= binary.MaxVarintLen64 || (len(c.cur) > 0 && c.cur[len(c.cur)-1] < 0x80) {
		// Within this buffer (its last byte ends any varint that reaches it).
		v, n := protowire.ConsumeVarint(c.cur)
		if n < 0 {
			return 0, false
		}
		c.cur, c.left = c.cur[n:], c.left-n
		return v, true
	}
	var b [binary.MaxVarintLen64]byte
	n := 0
	for n < len(b) && c.more() {
		b[n] = c.cur[0]
		c.cur, c.left = c.cur[1:], c.left-1
		n++
		if b[n-1] < 0x80 {
			v, m := protowire.ConsumeVarint(b[:n])
			return v, m == n
		}
	}
	return 0, false
}

// take returns the next n bytes (n <= left): in place when they lie in the
// current buffer, else copied into *scratch.
func (c *wireCursor) take(n int, scratch *[]byte) []byte {
	c.more()
	if len(c.cur) >= n {
		b := c.cur[:n]
		c.cur, c.left = c.cur[n:], c.left-n
		return b
	}
	if cap(*scratch) < n {
		*scratch = make([]byte, n)
	}
	b := (*scratch)[:n]
	for off := 0; off < n && c.more(); {
		m := copy(b[off:], c.cur)
		c.cur, off = c.cur[m:], off+m
	}
	c.left -= n
	return b
}

// skip passes n bytes unread.
func (c *wireCursor) skip(n int) bool {
	if n > c.left {
		return false
	}
	c.left -= n
	for n > 0 && c.more() {
		m := min(n, len(c.cur))
		c.cur, n = c.cur[m:], n-m
	}
	return true
}

// The item scanners are plain loops over the fields: a callback per field
// cost as much as the rest of the scan. Fields of the wrong wire type are
// skipped, as a decoder would reject them.

// nextField reads one field's tag and value: a varint's value in v, a
// length-delimited field's bytes in f; other types are skipped. It returns
// the rest of the message, or ok false at a malformed byte.
func nextField(b []byte) (num protowire.Number, typ protowire.Type, v uint64, f, rest []byte, ok bool) {
	if len(b) > 0 && b[0] < 0x80 { // tags of the fields we read are one byte
		num, typ, b = protowire.Number(b[0]>>3), protowire.Type(b[0]&7), b[1:]
	} else {
		var n int
		if num, typ, n = protowire.ConsumeTag(b); n < 0 {
			return 0, 0, 0, nil, nil, false
		}
		b = b[n:]
	}
	switch typ {
	case protowire.VarintType:
		if len(b) > 0 && b[0] < 0x80 {
			return num, typ, uint64(b[0]), nil, b[1:], true
		}
		x, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return 0, 0, 0, nil, nil, false
		}
		return num, typ, x, nil, b[n:], true
	case protowire.BytesType:
		var l uint64
		n := 1
		if len(b) > 0 && b[0] < 0x80 {
			l = uint64(b[0])
		} else if l, n = protowire.ConsumeVarint(b); n < 0 {
			return 0, 0, 0, nil, nil, false
		}
		if l > uint64(len(b)-n) {
			return 0, 0, 0, nil, nil, false
		}
		return num, typ, 0, b[n : n+int(l)], b[n+int(l):], true
	}
	n := protowire.ConsumeFieldValue(num, typ, b)
	if n < 0 {
		return 0, 0, 0, nil, nil, false
	}
	return num, typ, 0, nil, b[n:], true
}

func scanContainer(b []byte, want Fields, it *Item) error {
	labels := want&(FieldNamespace|FieldIdentity) != 0
	for len(b) > 0 {
		num, typ, v, f, rest, ok := nextField(b)
		if !ok {
			return errMalformed
		}
		b = rest
		if typ == protowire.VarintType {
			switch {
			case num == containerStateField:
				it.State = int32(v)
			case num == containerCreatedField && want&FieldCreated != 0:
				it.CreatedAt = int64(v)
			}
			continue
		}
		if typ != protowire.BytesType {
			continue
		}
		switch {
		case num == containerIDField && want&FieldID != 0:
			it.ID = f
		case num == containerSandboxIDField && want&(FieldIdentity|FieldSandboxID) != 0:
			it.SandboxID = f
		case num == containerMetadataField && want&FieldIdentity != 0:
			if err := scanContainerMetadata(f, it); err != nil {
				return err
			}
		case num == containerLabelsField && labels:
			k, val, ok := mapEntry(f)
			if !ok {
				// An entry the decoder would reject: read nothing of it.
				continue
			}
			switch {
			case string(k) == namespaceLabel && want&FieldNamespace != 0:
				it.Namespace = val
			case string(k) == podNameLabel && want&FieldIdentity != 0:
				it.Pod = val
			case string(k) == podUIDLabel && want&FieldIdentity != 0:
				it.PodUID = val
			}
		}
	}
	return nil
}

func scanContainerMetadata(b []byte, it *Item) error {
	for len(b) > 0 {
		num, typ, v, f, rest, ok := nextField(b)
		if !ok {
			return errMalformed
		}
		b = rest
		switch {
		case num == containerNameField && typ == protowire.BytesType:
			it.Name = f
		case num == containerAttemptField && typ == protowire.VarintType:
			it.Attempt = uint32(v)
		}
	}
	return nil
}

func scanSandbox(b []byte, want Fields, it *Item) error {
	for len(b) > 0 {
		num, typ, v, f, rest, ok := nextField(b)
		if !ok {
			return errMalformed
		}
		b = rest
		switch {
		case num == sandboxStateField && typ == protowire.VarintType:
			it.State = int32(v)
		case num == sandboxIDField && typ == protowire.BytesType && want&FieldID != 0:
			it.ID = f
		case num == sandboxCreatedField && typ == protowire.VarintType && want&FieldCreated != 0:
			it.CreatedAt = int64(v)
		case num == sandboxMetadataField && typ == protowire.BytesType && want&(FieldNamespace|FieldIdentity) != 0:
			if err := scanSandboxMetadata(f, want, it); err != nil {
				return err
			}
		}
	}
	return nil
}

func scanSandboxMetadata(b []byte, want Fields, it *Item) error {
	for len(b) > 0 {
		num, typ, v, f, rest, ok := nextField(b)
		if !ok {
			return errMalformed
		}
		b = rest
		switch {
		case num == metadataNamespaceField && typ == protowire.BytesType && want&FieldNamespace != 0:
			it.Namespace = f
		case num == metadataNameField && typ == protowire.BytesType && want&FieldIdentity != 0:
			it.Name, it.Pod = f, f
		case num == metadataUIDField && typ == protowire.BytesType && want&FieldIdentity != 0:
			it.PodUID = f
		case num == metadataAttemptField && typ == protowire.VarintType && want&FieldIdentity != 0:
			it.Attempt = uint32(v)
		}
	}
	return nil
}

// mapEntry reads a map<string,string> entry's key and value: the first of
// each, in one pass. ok is false at a malformed byte.
func mapEntry(b []byte) (key, value []byte, ok bool) {
	var haveKey, haveValue bool
	for len(b) > 0 && !(haveKey && haveValue) {
		num, typ, _, f, rest, ok := nextField(b)
		if !ok {
			return key, value, haveKey
		}
		b = rest
		if typ != protowire.BytesType {
			continue
		}
		switch {
		case num == mapKeyField && !haveKey:
			key, haveKey = f, true
		case num == mapValueField && !haveValue:
			value, haveValue = f, true
		}
	}
	return key, value, haveKey
}

// rawCodec marshals requests as protobuf and hands list answers to the
// scanner without decoding them. It keeps the name "proto": on the wire
// nothing changes.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("raw codec: cannot marshal %T", v)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	s, ok := v.(*listSummary)
	if !ok {
		return fmt.Errorf("raw codec: cannot unmarshal into %T", v)
	}
	return scanBuffers(data, s)
}

var _ encoding.CodecV2 = rawCodec{}

// The list calls, unary and streamed, with their answers going to the
// scanner. The read-only interceptors see them like any other call.
var (
	listSandboxes = listCall{
		sandboxes: true,
		unary:     runtimeapi.RuntimeService_ListPodSandbox_FullMethodName,
		stream:    runtimeapi.RuntimeService_StreamPodSandboxes_FullMethodName,
		desc:      &grpc.StreamDesc{StreamName: "StreamPodSandboxes", ServerStreams: true},
	}
	listContainers = listCall{
		unary:  runtimeapi.RuntimeService_ListContainers_FullMethodName,
		stream: runtimeapi.RuntimeService_StreamContainers_FullMethodName,
		desc:   &grpc.StreamDesc{StreamName: "StreamContainers", ServerStreams: true},
	}
)

type listCall struct {
	sandboxes     bool
	unary, stream string
	desc          *grpc.StreamDesc
}

// request builds the unary or streamed request with a filter: nil, a
// *runtimeapi.PodSandboxFilter or a *runtimeapi.ContainerFilter.
func (l listCall) request(streamed bool, filter proto.Message) proto.Message {
	if l.sandboxes {
		f, _ := filter.(*runtimeapi.PodSandboxFilter)
		if streamed {
			return &runtimeapi.StreamPodSandboxesRequest{Filter: f}
		}
		return &runtimeapi.ListPodSandboxRequest{Filter: f}
	}
	f, _ := filter.(*runtimeapi.ContainerFilter)
	if streamed {
		return &runtimeapi.StreamContainersRequest{Filter: f}
	}
	return &runtimeapi.ListContainersRequest{Filter: f}
}

// invoke makes the unary list call.
func (c *Client) invoke(ctx context.Context, l listCall, filter proto.Message, s *listSummary) error {
	s.sandboxes = l.sandboxes
	return c.conn.Invoke(ctx, l.unary, l.request(false, filter), s, grpc.ForceCodecV2(rawCodec{}))
}

// streamAll reads a whole streamed list; every message goes through the
// scanner as it arrives.
func (c *Client) streamAll(ctx context.Context, l listCall, filter proto.Message, s *listSummary) error {
	s.sandboxes = l.sandboxes
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cs, err := c.conn.NewStream(ctx, l.desc, l.stream, grpc.ForceCodecV2(rawCodec{}))
	if err != nil {
		return err
	}
	if err := cs.SendMsg(l.request(true, filter)); err != nil {
		return err
	}
	if err := cs.CloseSend(); err != nil {
		return err
	}
	for {
		before := s.Size
		if err := cs.RecvMsg(s); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		s.MaxMessage = max(s.MaxMessage, s.Size-before)
	}
}
