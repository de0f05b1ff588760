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
	"errors"
	"slices"
	"sort"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// candidate is a notready sandbox or an unknown container of the latest
// relist: the ones whose status calls hang in the field.
type candidate struct {
	kind    string
	id      string
	created int64
}

func (a candidate) before(b candidate) bool {
	if a.created != b.created {
		return a.created < b.created
	}
	return a.id < b.id
}

// Probe times the status calls of at most ProbeMax candidates, oldest first,
// continuing after the last one probed so that every candidate gets its turn
// across cycles. Each call has its own short deadline (ProbeTimeout).
func (c *Client) Probe(ctx context.Context) []kubecontainer.ProbeResult {
	c.mu.Lock()
	cands := append([]candidate(nil), c.candidates...)
	cursor := c.probeCursor
	c.mu.Unlock()
	if len(cands) == 0 || c.cfg.ProbeMax <= 0 {
		return nil
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].before(cands[j]) })
	start := sort.Search(len(cands), func(i int) bool { return cursor.before(cands[i]) })
	var pick []candidate
	for i := 0; i < len(cands) && len(pick) < c.cfg.ProbeMax; i++ {
		pick = append(pick, cands[(start+i)%len(cands)])
	}
	var out []kubecontainer.ProbeResult
	gone := map[string]bool{}
	for _, p := range pick {
		if ctx.Err() != nil {
			break
		}
		pctx, cancel := context.WithTimeout(ctx, c.cfg.ProbeTimeout)
		t0 := time.Now()
		var err error
		if p.kind == kubecontainer.ProbeSandbox {
			_, err = c.rs.PodSandboxStatus(pctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: p.id})
		} else {
			_, err = c.rs.ContainerStatus(pctx, &runtimeapi.ContainerStatusRequest{ContainerId: p.id})
		}
		cancel()
		r := kubecontainer.ProbeResult{Kind: p.kind, ID: p.id, Duration: time.Since(t0), Err: err}
		r.TimedOut = status.Code(err) == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded)
		if status.Code(err) == codes.NotFound {
			gone[p.id] = true
		}
		out = append(out, r)
		c.mu.Lock()
		c.probeCursor = p
		c.mu.Unlock()
	}
	if len(gone) > 0 {
		// Removed since it was listed: nothing left to hang. A partial
		// listing, which keeps the candidates it did not see, would keep
		// these until the next complete one.
		c.mu.Lock()
		c.candidates = slices.DeleteFunc(c.candidates, func(p candidate) bool { return gone[p.id] })
		c.mu.Unlock()
	}
	return out
}

// candidateScan collects one kind of candidate during a relist, and which
// of the previous ones the listing saw, in any state.
type candidateScan struct {
	kind string
	new  []candidate
	prev map[string]*prevCandidate
}

type prevCandidate struct {
	candidate
	seen bool
}

func newCandidateScan(kind string, prev []candidate) *candidateScan {
	s := &candidateScan{kind: kind, prev: map[string]*prevCandidate{}}
	for _, p := range prev {
		if p.kind == kind {
			s.prev[p.id] = &prevCandidate{candidate: p}
		}
	}
	return s
}

// visit takes one listed item; suspect says whether it is a candidate.
func (s *candidateScan) visit(it *Item, suspect bool) {
	if len(s.prev) > 0 {
		if p, ok := s.prev[string(it.ID)]; ok {
			p.seen = true
		}
	}
	if suspect {
		s.new = append(s.new, candidate{kind: s.kind, id: string(it.ID), created: it.CreatedAt})
	}
}

// reset forgets what a stream that broke half way visited: the lister lists
// those items again another way.
func (s *candidateScan) reset() {
	s.new = s.new[:0]
	for _, p := range s.prev {
		p.seen = false
	}
}

// result is the new candidates when the listing covered every item of the
// kind. Otherwise it also keeps the previous candidates the listing did not
// see: not listed is not gone, and a runtime that cannot be listed whole is
// the one whose status calls need watching.
func (s *candidateScan) result(covered bool) []candidate {
	if covered {
		return s.new
	}
	out := s.new
	for _, p := range s.prev {
		if !p.seen {
			out = append(out, p.candidate)
		}
	}
	return out
}
