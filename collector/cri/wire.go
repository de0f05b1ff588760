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
const (
	listItemsField         = 1 // ListContainersResponse.containers, ListPodSandboxResponse.items
	containerStateField    = 6 // Container.state
	containerLabelsField   = 8 // Container.labels (map<string,string>)
	sandboxMetadataField   = 2 // PodSandbox.metadata
	sandboxStateField      = 3 // PodSandbox.state
	sandboxIDField         = 1 // PodSandbox.id, Container.id
	containerCreatedField  = 7 // Container.created_at
	sandboxCreatedField    = 4 // PodSandbox.created_at
	metadataNamespaceField = 3 // PodSandboxMetadata.namespace
	mapKeyField            = 1
	mapValueField          = 2
)

const namespaceLabel = "io.kubernetes.pod.namespace"

// item is what the scanner reports of one listed container or sandbox.
type item struct {
	State     int32  // the enum value; 0 (CREATED / READY) when absent on the wire
	Namespace []byte // only when asked for; valid only during the callback
	ID        []byte // with keepIDs or candidates; valid only during the callback
	CreatedAt int64  // with candidates
	Bytes     int    // what the item adds to the answer (tag + length + body)
}

// listSummary is the response type of a raw list call.
type listSummary struct {
	sandboxes  bool // which message the items are
	namespaces bool // extract namespaces
	keepIDs    bool // collect sandbox ids (for the per-sandbox fallback)
	candidates bool // read ids and creation times (for the status probes)
	onItem     func(item)
	Size       int // the serialized size of the whole answer
	Items      int
	States     [4]int // items by state enum (containers 0..3, sandboxes 0..1); others count as the last
	IDs        []string
}

// containerCounts returns the container counts by the kubelet's state names.
func (s *listSummary) containerCounts() map[string]int {
	m := map[string]int{}
	for st, n := range s.States {
		m[containerState(runtimeapi.ContainerState(st))] += n
	}
	return m
}

// sandboxCounts returns the sandbox counts by state name.
func (s *listSummary) sandboxCounts() map[string]int {
	return map[string]int{
		sandboxState(runtimeapi.PodSandboxState_SANDBOX_READY):    s.States[0],
		sandboxState(runtimeapi.PodSandboxState_SANDBOX_NOTREADY): s.States[1] + s.States[2] + s.States[3],
	}
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
	s.Size = r.Remaining()
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
			it, err := scanItem(body, s)
			if err != nil {
				return err
			}
			it.Bytes = protowire.SizeVarint(tag) + protowire.SizeVarint(l) + int(l)
			s.Items++
			if it.State >= 0 && it.State < 3 {
				s.States[it.State]++
			} else {
				s.States[3]++
			}
			if s.keepIDs && it.ID != nil {
				s.IDs = append(s.IDs, string(it.ID))
			}
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

func scanItem(b []byte, s *listSummary) (item, error) {
	var it item
	stateField := protowire.Number(containerStateField)
	if s.sandboxes {
		stateField = sandboxStateField
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return it, errMalformed
		}
		b = b[n:]
		switch {
		case num == stateField && typ == protowire.VarintType:
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return it, errMalformed
			}
			it.State = int32(v)
			b = b[m:]
			continue
		case num == createdField(s.sandboxes) && typ == protowire.VarintType && s.candidates:
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return it, errMalformed
			}
			it.CreatedAt = int64(v)
			b = b[m:]
			continue
		case num == sandboxIDField && typ == protowire.BytesType && (s.keepIDs || s.candidates):
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return it, errMalformed
			}
			it.ID = v
			b = b[m:]
			continue
		case s.namespaces && typ == protowire.BytesType &&
			((s.sandboxes && num == sandboxMetadataField) || (!s.sandboxes && num == containerLabelsField)):
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return it, errMalformed
			}
			if s.sandboxes {
				if ns, ok := stringField(v, metadataNamespaceField); ok {
					it.Namespace = ns
				}
			} else if k, ok := stringField(v, mapKeyField); ok && string(k) == namespaceLabel {
				it.Namespace, _ = stringField(v, mapValueField)
			}
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return it, errMalformed
		}
		b = b[m:]
	}
	return it, nil
}

func createdField(sandboxes bool) protowire.Number {
	if sandboxes {
		return sandboxCreatedField
	}
	return containerCreatedField
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

func (c *Client) listContainersRaw(ctx context.Context, f *runtimeapi.ContainerFilter, s *listSummary) error {
	return c.conn.Invoke(ctx, runtimeapi.RuntimeService_ListContainers_FullMethodName,
		&runtimeapi.ListContainersRequest{Filter: f}, s, grpc.ForceCodecV2(rawCodec{}))
}

func (c *Client) listSandboxesRaw(ctx context.Context, f *runtimeapi.PodSandboxFilter, s *listSummary) error {
	s.sandboxes = true
	return c.conn.Invoke(ctx, runtimeapi.RuntimeService_ListPodSandbox_FullMethodName,
		&runtimeapi.ListPodSandboxRequest{Filter: f}, s, grpc.ForceCodecV2(rawCodec{}))
}
