package executor

import (
	"context"
	"errors"
	"time"

	corosql "github.com/corotask/corotask/sql"
)

// claimLoop claims work whenever there are free slots and a reason to look:
// a NOTIFY, a finished poll, the next known wake_at, or PollInterval. It
// runs in Run's goroutine, and returns when ctx ends (nil), or after a
// schema fault (see schemaGuard.fault) with the error Run returns.
func (e *Executor) claimLoop(ctx context.Context) error {
	v := e.env
	timer := time.NewTimer(0)
	defer timer.Stop()
	var retries claimRetries
	for {
		select {
		case <-ctx.Done():
			return nil
		case fault := <-v.schema.faults:
			return v.schema.stopErr(ctx, fault)
		default:
		}
		wait := v.cfg.PollInterval
		if req := e.claimer.request(); req.total > 0 {
			req.share = true
			var got []*claimed
			var next time.Time
			var err error
			if retries.failures > 0 {
				// After failed claims (a lost connection, a restarted
				// server, a failover), the schema is checked again.
				err = v.schema.check(ctx, v.pool)
				var se *corosql.SchemaError
				if errors.As(err, &se) {
					v.schema.stop(err)
					continue
				}
			}
			if err == nil {
				got, next, err = e.claimer.claim(ctx, req)
			}
			if err == nil && ctx.Err() != nil {
				// Claimed as the stop began (a claim runs to its end, so that
				// none is left held unknown to this executor): given back.
				if len(got) > 0 {
					e.committer.giveBack(got, 0)
				}
				return nil
			}
			if err == nil && v.schema.faulted.Load() {
				// Claimed as a fault stopped the executor: not polled.
				if len(got) > 0 {
					e.committer.giveBack(got, 0)
				}
				continue
			}
			switch {
			case err != nil && ctx.Err() != nil:
				return nil
			case v.schema.fault(err):
				continue
			case err != nil:
				var atOnce bool
				if wait, atOnce = retries.failed(v, err, "claim"); atOnce {
					continue
				}
			default:
				retries.succeeded()
				e.startClaimed(got)
				if len(got) == req.total {
					continue // there may be more ready right now
				}
				if !next.IsZero() {
					wait = min(wait, max(time.Until(next), time.Millisecond))
				}
			}
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case fault := <-v.schema.faults:
			return v.schema.stopErr(ctx, fault)
		case <-v.wake:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// startClaimed has the polls start the claimed tasks, and gives back those
// this executor is still polling (see polls.start).
func (e *Executor) startClaimed(got []*claimed) {
	var dup []*claimed
	for _, c := range got {
		if !e.polls.start(c) {
			dup = append(dup, c)
		}
	}
	if len(dup) > 0 {
		// Not ready again before PollInterval: the old poll may run on, and
		// an immediate release would be claimed (and given back) again at
		// once, in a loop.
		e.committer.giveBack(dup, e.env.cfg.PollInterval)
	}
}
