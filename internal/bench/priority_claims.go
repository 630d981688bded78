package bench

import (
	"context"
	"sync"
	"time"

	"github.com/corotask/corotask/executor"
)

// claimSpan is when a claim statement began and ended.
type claimSpan struct{ start, end time.Time }

// claimClock is executor hooks that keep the spans of the latest claims
// that claimed a task or more, so that priority can split a
// high-priority task's latency into its parts: the wait for the claim that
// took it, that claim, and the start of the poll.
type claimClock struct {
	hookChain

	mu    sync.Mutex
	spans [64]claimSpan // a ring, i the next to write
	i     int
	lane  int // tasks the priority lane claimed (executor.ClaimInfo.Priority)
}

func (c *claimClock) ClaimDone(ctx context.Context, info *executor.ClaimInfo) {
	if info.Claimed > 0 && info.Err == nil {
		end := time.Now()
		c.mu.Lock()
		c.spans[c.i] = claimSpan{end.Add(-info.Duration), end}
		c.i = (c.i + 1) % len(c.spans)
		if info.Priority {
			c.lane += info.Claimed
		}
		c.mu.Unlock()
	}
	c.hookChain.ClaimDone(ctx, info)
}

// laneTasks is how many tasks the priority lane claimed.
func (c *claimClock) laneTasks() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lane
}

// before returns the span of the latest claim that ended before t: the
// claim that took a task whose poll started at t (the claim loop runs one
// claim at a time, and starts the polls of one before it begins the next;
// should a poll's goroutine start after the next claim ended, that claim
// is taken instead, and the split understates the wait).
func (c *claimClock) before(t time.Time) (claimSpan, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var best claimSpan
	for _, s := range c.spans {
		if !s.end.IsZero() && !s.end.After(t) && s.end.After(best.end) {
			best = s
		}
	}
	return best, !best.end.IsZero()
}
