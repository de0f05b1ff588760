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

package fakecri

import (
	"bytes"
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// wireCodec marshals like gRPC's own protobuf codec, then rewrites the
// answer's bytes (Options.OnTheWire). Only a server with rewrites uses it;
// the others keep gRPC's pooled codec, which the benchmarks measure against.
type wireCodec struct {
	from, to [][]byte
}

func newWireCodec(rewrites map[string]string) (*wireCodec, error) {
	c := &wireCodec{}
	for from, to := range rewrites {
		if len(from) != len(to) || from == "" {
			return nil, fmt.Errorf("fakecri: on the wire %q must become bytes of the same length, not %q", from, to)
		}
		c.from, c.to = append(c.from, []byte(from)), append(c.to, []byte(to))
	}
	return c, nil
}

func (*wireCodec) Name() string { return "proto" }

func (c *wireCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("fakecri: cannot marshal %T", v)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	for i, from := range c.from {
		// Same length: every length prefix stays right.
		for rest := b; ; {
			j := bytes.Index(rest, from)
			if j < 0 {
				break
			}
			copy(rest[j:], c.to[i])
			rest = rest[j+len(from):]
		}
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (*wireCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("fakecri: cannot unmarshal into %T", v)
	}
	return proto.Unmarshal(data.Materialize(), m)
}

var _ encoding.CodecV2 = (*wireCodec)(nil)
