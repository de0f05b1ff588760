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

package fleet

import (
	"context"
	"sync"
	"time"
)

// clock is the fleet's time: the wall clock, or a virtual one that History
// moves, until it hands over to the wall clock.
type clock struct {
	mu      sync.Mutex
	cond    *sync.Cond
	virtual bool
	t       time.Time
}

func newClock(virtualAt time.Time) *clock {
	c := &clock{virtual: !virtualAt.IsZero(), t: virtualAt}
	c.cond = sync.NewCond(&c.mu)
	return c
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.virtual {
		return c.t
	}
	return time.Now()
}

// set moves the virtual clock (never backwards) and wakes its waiters.
func (c *clock) set(t time.Time) {
	c.mu.Lock()
	if t.After(c.t) {
		c.t = t
	}
	c.mu.Unlock()
	c.cond.Broadcast()
}

// real hands over to the wall clock.
func (c *clock) real() {
	c.mu.Lock()
	c.virtual = false
	c.mu.Unlock()
	c.cond.Broadcast()
}

// waitUntil returns once the clock reads t or later, or ctx ends.
func (c *clock) waitUntil(ctx context.Context, t time.Time) {
	c.mu.Lock()
	for c.virtual && c.t.Before(t) && ctx.Err() == nil {
		c.cond.Wait()
	}
	virtual := c.virtual
	c.mu.Unlock()
	if virtual {
		return
	}
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
}
