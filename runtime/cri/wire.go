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
	r := mem.BufferSlice{mem.SliceBuffer(b)}.Reader()
	defer r.Close()
	return scanReader(r, s)
}

// scanReader walks the answer as gRPC received it, a chain of frame
// buffers, without joining them: each item (a few KiB) is copied into one
// reused scratch buffer and scanned there, and every consumed frame buffer
// goes back to gRPC's pool. So the answer is held in memory once, not twice.
func scanReader(r *mem.Reader, s *listSummary) error {
	s.Size += r.Remaining()
	var scratch []byte
	for r.Remaining() > 0 {
		tag, err := binary.ReadUvarint(r)
		if err != nil {
			return errMalformed
		}
		num, typ := protowire.DecodeTag(tag)
		if num < 1 {
			return errMalformed
		}
		switch typ {
		case protowire.VarintType:
			if _, err := binary.ReadUvarint(r); err != nil {
				return errMalformed
			}
		case protowire.Fixed32Type, protowire.Fixed64Type:
			n := 4
			if typ == protowire.Fixed64Type {
				n = 8
			}
			if err := skip(r, n, &scratch); err != nil {
				return err
			}
		case protowire.BytesType:
			l, err := binary.ReadUvarint(r)
			if err != nil || l > uint64(r.Remaining()) {
				return errMalformed
			}
			if num != listItemsField {
				if err := skip(r, int(l), &scratch); err != nil {
					return err
				}
				continue
			}
			if cap(scratch) < int(l) {
				scratch = make([]byte, l)
			}
			body := scratch[:l]
			if _, err := io.ReadFull(r, body); err != nil {
				return errMalformed
			}
			// One Item reused for every item: handed to a callback, a
			// fresh one would escape to the heap once per item.
			it := &s.item
			*it = Item{}
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

func skip(r *mem.Reader, n int, scratch *[]byte) error {
	if n > r.Remaining() {
		return errMalformed
	}
	if cap(*scratch) < 4096 {
		*scratch = make([]byte, 4096)
	}
	for n > 0 {
		m, err := r.Read((*scratch)[:min(n, cap(*scratch))])
		if err != nil {
			return errMalformed
		}
		n -= m
	}
	return nil
}

// field is one field of a message as protowire reads it.
type field struct {
	num    protowire.Number
	typ    protowire.Type
	varint uint64 // VarintType
	bytes  []byte // BytesType
}

// eachField calls fn for every varint and length-delimited field of a
// message and skips the rest; it stops at the first malformed byte.
func eachField(b []byte, fn func(f field) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errMalformed
		}
		b = b[n:]
		f := field{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			f.varint, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			f.bytes, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return errMalformed
			}
			b = b[n:]
			continue
		}
		if n < 0 {
			return errMalformed
		}
		b = b[n:]
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

func scanContainer(b []byte, want Fields, it *Item) error {
	labels := want&(FieldNamespace|FieldIdentity) != 0
	return eachField(b, func(f field) error {
		switch {
		case f.num == containerStateField && f.typ == protowire.VarintType:
			it.State = int32(f.varint)
		case f.num == containerIDField && want&FieldID != 0:
			it.ID = f.bytes
		case f.num == containerCreatedField && want&FieldCreated != 0:
			it.CreatedAt = int64(f.varint)
		case f.num == containerSandboxIDField && want&(FieldIdentity|FieldSandboxID) != 0:
			it.SandboxID = f.bytes
		case f.num == containerMetadataField && want&FieldIdentity != 0:
			return eachField(f.bytes, func(m field) error {
				switch m.num {
				case containerNameField:
					it.Name = m.bytes
				case containerAttemptField:
					it.Attempt = uint32(m.varint)
				}
				return nil
			})
		case f.num == containerLabelsField && labels:
			k, _ := stringField(f.bytes, mapKeyField)
			switch {
			case string(k) == namespaceLabel && want&FieldNamespace != 0:
				it.Namespace, _ = stringField(f.bytes, mapValueField)
			case string(k) == podNameLabel && want&FieldIdentity != 0:
				it.Pod, _ = stringField(f.bytes, mapValueField)
			case string(k) == podUIDLabel && want&FieldIdentity != 0:
				it.PodUID, _ = stringField(f.bytes, mapValueField)
			}
		}
		return nil
	})
}

func scanSandbox(b []byte, want Fields, it *Item) error {
	return eachField(b, func(f field) error {
		switch {
		case f.num == sandboxStateField && f.typ == protowire.VarintType:
			it.State = int32(f.varint)
		case f.num == sandboxIDField && want&FieldID != 0:
			it.ID = f.bytes
		case f.num == sandboxCreatedField && want&FieldCreated != 0:
			it.CreatedAt = int64(f.varint)
		case f.num == sandboxMetadataField && want&(FieldNamespace|FieldIdentity) != 0:
			return eachField(f.bytes, func(m field) error {
				switch {
				case m.num == metadataNamespaceField && want&FieldNamespace != 0:
					it.Namespace = m.bytes
				case m.num == metadataNameField && want&FieldIdentity != 0:
					it.Name, it.Pod = m.bytes, m.bytes
				case m.num == metadataUIDField && want&FieldIdentity != 0:
					it.PodUID = m.bytes
				case m.num == metadataAttemptField && want&FieldIdentity != 0:
					it.Attempt = uint32(m.varint)
				}
				return nil
			})
		}
		return nil
	})
}

// stringField returns the first length-delimited field num of a message.
func stringField(b []byte, want protowire.Number) ([]byte, bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, false
		}
		b = b[n:]
		if num == want && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			return v, m >= 0
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return nil, false
		}
		b = b[m:]
	}
	return nil, false
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
	r := data.Reader()
	defer r.Close()
	return scanReader(r, s)
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
