package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
)

// PollOnce claims the tasks that are ready now (up to Config.Concurrency),
// polls them one after another in ID order, and commits each outcome, with no
// background loops: a deterministic step for tests of pollers. It returns how
// many tasks it polled, and an error joining any failed polls (which are
// recorded as failures, as Run would) and database errors.
func (e *Executor) PollOnce(ctx context.Context) (int, error) {
	if e.cfgErr != nil {
		return 0, e.cfgErr
	}
	req := e.request()
	req.stale = true
	if req.total == 0 {
		return 0, errors.New("executor: no pollers registered")
	}
	got, _, err := e.claim(ctx, req)
	if err != nil {
		return 0, err
	}
	slices.SortFunc(got, func(a, b *claimed) int { return bytes.Compare(a.id[:], b.id[:]) })
	var errs []error
	for _, c := range got {
		e.mu.Lock()
		h := e.handlers[c.typ]
		e.mu.Unlock()
		ctx := e.hooks.pollStart(ctx, c)
		out := h.poll(ctx, c)
		e.hooks.pollReturned(c, out)
		if out.err != nil {
			errs = append(errs, fmt.Errorf("poll %s (%s): %w", c.id, c.typ, out.err))
		}
		if err := e.settle(ctx, c, out, h.options()); err != nil {
			errs = append(errs, fmt.Errorf("commit %s (%s): %w", c.id, c.typ, err))
		}
		e.hooks.pollDone(ctx, c)
	}
	return len(got), errors.Join(errs...)
}
