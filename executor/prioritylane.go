package executor

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// priorityLane claims tasks of a priority above 0 into the executor's
// priority slots (Config.PrioritySlots), beside the claim loop. The claim
// loop already takes such tasks first, but a busy executor's claim loop is
// always in a claim, and its slots are all taken: a task made ready meanwhile
// waits for that claim to end and for a slot to free. The lane waits for
// nothing but an announcement of one of the executor's types, a priority
// slot freed, or PollInterval, and then claims with the claim statement
// whose search of priority 0 reads nothing (laneFloors), so its claims are
// small and quick. Of a type with flow controls, its claim locks the
// controls exclusive (req.share false: the shares of ClaimControls count
// one claim in flight per executor, and the lane is a second), so it waits
// for the claims of that type in flight across the fleet.
//
// It runs in a goroutine of Run's from the claim loop's start until it
// ends: a claim made as ctx ends is given back, as the claim loop's is.
// A claim whose connection was severed is tried again at once, other
// errors are logged and retried after a backoff, as the claim loop does; a
// schema fault is recorded for the claim loop, which stops Run.
func (e *Executor) priorityLane(ctx context.Context) {
	v := e.env
	timer := time.NewTimer(0)
	defer timer.Stop()
	var retries claimRetries
	for {
		if ctx.Err() != nil || v.schema.faulted.Load() {
			return
		}
		wait := v.cfg.PollInterval
		if req := e.slots.laneRequest(); req.total > 0 {
			got, _, err := e.claimer.claim(ctx, req)
			switch {
			case err == nil && (ctx.Err() != nil || v.schema.faulted.Load()):
				if len(got) > 0 {
					e.committer.giveBack(got, 0)
				}
				return
			case err != nil && ctx.Err() != nil:
				return
			case v.schema.fault(err):
				return
			case err != nil:
				var atOnce bool
				if wait, atOnce = retries.failed(v, err, "priority claim"); atOnce {
					continue
				}
			default:
				retries.succeeded()
				e.startClaimed(got)
				if len(got) == req.total {
					continue // there may be more
				}
			}
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-v.laneWake:
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

// startPriorityLane runs priorityLane in a goroutine of its own, with
// Config.PrioritySlots, and returns a function that stops it and waits for
// it to return (its claim in flight made).
func (e *Executor) startPriorityLane(ctx context.Context) (stop func()) {
	if e.env.cfg.PrioritySlots == 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.priorityLane(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// laneFloors are the floors of a priority lane's claim, for its n types:
// beyond every ready task, so that its search of priority 0 reads nothing
// (see query.Claim's $10).
func laneFloors(n int) []pgtype.Timestamptz {
	fs := make([]pgtype.Timestamptz, n)
	for i := range fs {
		fs[i] = pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}
	}
	return fs
}
