package cri

import (
	"context"
	"errors"
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
		out = append(out, r)
		c.mu.Lock()
		c.probeCursor = p
		c.mu.Unlock()
	}
	return out
}
