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
//
// Like Run, it checks the database's schema first (at its first call, and
// again after a schema error): on a schema this build does not run on it
// claims nothing and returns the *sql.SchemaError. A statement of corotask's
// that fails with an error of class 42 counts nothing against the task: the
// claims it holds are given back, and it returns at once.
func (e *Executor) PollOnce(ctx context.Context) (int, error) {
	defer e.env.distribution.done()
	req := e.claimer.request()
	req.stale = true
	if req.total == 0 {
		return 0, errors.New("executor: no pollers registered")
	}
	if !e.env.schema.checked.Load() {
		if err := e.startChecked(ctx); err != nil {
			return 0, err
		}
		e.env.schema.checked.Store(true)
	}
	got, _, err := e.claimer.claim(ctx, req)
	if err != nil {
		if e.env.schema.fault(err) {
			return 0, e.env.schema.stopErr(ctx, err)
		}
		return 0, err
	}
	slices.SortFunc(got, func(a, b *claimed) int { return bytes.Compare(a.id[:], b.id[:]) })
	var errs []error
	for i, c := range got {
		h, _ := e.env.pollers.get(c.typ)
		ctx := e.env.hooks.pollStart(ctx, c)
		pctx, deadline := withPollTimeout(ctx, h.options().pollTimeout, c.typ)
		out := deadline.returned(h.poll(pctx, c))
		e.env.hooks.pollReturned(c, out)
		if out.err != nil {
			errs = append(errs, fmt.Errorf("poll %s (%s): %w", c.id, c.typ, out.err))
		}
		err := e.committer.settle(ctx, c, out, h.options())
		e.env.hooks.pollDone(ctx, c)
		if isSchemaFault(err) {
			// Nothing more is polled: the rest are given back unpolled.
			if rest := got[i+1:]; len(rest) > 0 {
				e.committer.giveBack(rest, 0)
			}
			return i + 1, errors.Join(append(errs, e.env.schema.stopErr(ctx, err))...)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("commit %s (%s): %w", c.id, c.typ, err))
		}
	}
	return len(got), errors.Join(errs...)
}
