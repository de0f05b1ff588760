package cri

import (
	"context"
	"errors"
	"fmt"

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
	sandboxIDField         = 1 // PodSandbox.id
	metadataNamespaceField = 3 // PodSandboxMetadata.namespace
	mapKeyField            = 1
	mapValueField          = 2
)

const namespaceLabel = "io.kubernetes.pod.namespace"

// item is what the scanner reports of one listed container or sandbox.
type item struct {
	State     int32  // the enum value; 0 (CREATED / READY) when absent on the wire
	Namespace []byte // only when asked for; aliases the receive buffer
	ID        []byte // sandboxes only; aliases the receive buffer
	Bytes     int    // what the item adds to the answer (tag + length + body)
}

// listSummary is the response type of a raw list call.
type listSummary struct {
	sandboxes  bool // which message the items are
	namespaces bool // extract namespaces
	keepIDs    bool // collect sandbox ids (for the per-sandbox fallback)
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

func scanList(b []byte, s *listSummary) error {
	s.Size = len(b)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errMalformed
		}
		if num != listItemsField || typ != protowire.BytesType {
			m := protowire.ConsumeFieldValue(num, typ, b[n:])
			if m < 0 {
				return errMalformed
			}
			b = b[n+m:]
			continue
		}
		body, m := protowire.ConsumeBytes(b[n:])
		if m < 0 {
			return errMalformed
		}
		it, err := scanItem(body, s)
		if err != nil {
			return err
		}
		it.Bytes = n + m
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
		b = b[n+m:]
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
		case s.sandboxes && num == sandboxIDField && typ == protowire.BytesType && s.keepIDs:
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
	// One buffer for an uncompressed message: no copy here.
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return scanList(buf.ReadOnlyData(), s)
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
