package bench

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// startStops stops a worker process Stops times, evenly over the pressure
// phase (the i-th at the middle of the i-th of Stops equal parts), each
// time the next one round the slots: SIGTERM, a wait for the process to
// exit, a count of the claims its executor still holds in the database
// (tasks whose claim is still recorded as its: claimed_by, with a claim),
// and a replacement. Every stop is made, late ones after the pressure's end
// too; the release waits for the last.
func startStops(ctx context.Context, r *runner, ctl *pgxpool.Pool, x *pressureExecutors, ph phases) releaseFunc {
	n := r.opts.Stops
	span := ph.release.Sub(ph.pressure)
	var (
		stops, left, leftMax int64
		exits                []time.Duration
		failure              error
		lastEnd              time.Time
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			at := ph.pressure.Add(span * time.Duration(2*i+1) / time.Duration(2*n))
			if sleepUntil(ctx, at) != nil {
				return
			}
			p, exit, err := x.restart(ctx, i%r.opts.Executors)
			if p != nil {
				stops++
				exits = append(exits, exit)
				var held int64
				if err := ctl.QueryRow(ctx, "SELECT count(*) FROM corotask.tasks WHERE claim IS NOT NULL AND claimed_by = $1", p.id).Scan(&held); err != nil {
					failure = err
					return
				}
				left += held
				leftMax = max(leftMax, held)
			}
			lastEnd = time.Now()
			if err != nil {
				failure = err
				return
			}
		}
	}()
	return func(res *Result) {
		<-done
		res.metric("stops", stops)
		res.metric("left_claimed", left)
		res.metric("left_claimed_max", leftMax)
		p := percentiles(exits, 50, 100)
		res.metric("stop_exit_p50_ms", p[0])
		res.metric("stop_exit_max_ms", p[1])
		if failure != nil {
			res.note("stop: stopped after %d of %d stops: %v", stops, n, failure)
		}
		if late := lastEnd.Sub(ph.release); late > 0 {
			res.note("stop: the last stop ended %.1fs after the end of the pressure phase", late.Seconds())
		}
	}
}
