package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/tasks"
)

const (
	idleType tasks.Type = "bench.idle"
	// unpolledType is a type no executor of the scenario polls.
	unpolledType tasks.Type = "bench.unpolled"
	// idleBackgroundBatch is how many background tasks one CreateMany makes.
	idleBackgroundBatch = 10_000
)

// backgroundStates are the states idle fills the table with.
// (unpolled: ready tasks of a type the executor does not poll).
var backgroundStates = []string{"sleeping", "suspended", "running", "unpolled"}

// idleLevel is what idle measured with one background.
type idleLevel struct {
	claim    float64 // ms, the executor's PollOnce with nothing ready: a claim that finds nothing (p50)
	pollOnce float64 // ms, the executor's PollOnce of K ready tasks (p50)
}

// runIdle: the cost of claiming K ready tasks with 0, then Levels tasks
// sleeping, suspended or running in the table. Each measurement starts from
// an emptied (TRUNCATEd) table, so that what one measurement leaves behind
// (dead tuples of its claims) does not weigh on the next.
func runIdle(ctx context.Context, r *runner, res *Result) error {
	o := r.opts
	res.param("k", o.K)
	res.param("levels", o.Levels)
	res.param("iterations", o.Iterations)
	db, err := r.pool(ctx, 4)
	if err != nil {
		return err
	}
	defer db.Close()
	ex, err := executor.New(db, executor.Config{Concurrency: o.K, Logger: r.log, Retention: -1})
	if err != nil {
		return err
	}
	executor.Register(ex, idleType, executor.PollerFunc[struct{}, json.RawMessage](
		func(ctx context.Context, t *executor.Task[struct{}, json.RawMessage]) (executor.Action, error) {
			return executor.Yield(), nil
		}))
	levels := append([]int{0}, o.Levels...)
	slices.Sort(levels)
	levels = slices.Compact(levels)
	for _, state := range backgroundStates {
		var base idleLevel
		for _, level := range levels {
			if _, err := db.Exec(ctx, "TRUNCATE corotask.tasks"); err != nil {
				return err
			}
			if err := addBackground(ctx, db, state, level); err != nil {
				return err
			}
			l, err := r.measureClaim(ctx, db, ex)
			if err != nil {
				return err
			}
			label := fmt.Sprintf("%s_%d", state, level)
			r.progress("%d tasks %s: claim of nothing %.3f ms, PollOnce of %d %.3f ms", level, state, l.claim, o.K, l.pollOnce)
			res.metric("claim_ms_"+label, l.claim)
			res.metric("pollonce_ms_"+label, l.pollOnce)
			if level == 0 {
				base = l
				continue
			}
			res.metric("claim_ratio_"+label, l.claim/base.claim)
			res.metric("pollonce_ratio_"+label, l.pollOnce/base.pollOnce)
		}
	}
	res.note("claim_ms_*: p50 of executor.PollOnce with no task ready (one claim, stale claims included, that finds nothing); pollonce_ms_*: p50 of executor.PollOnce on %d ready tasks (claim, poll, commit with Yield); ratios are against the same state's 0", o.K)
	res.note("background: sleeping = wake_at in an hour; suspended = wake_at NULL; running = claimed, the claim expiring in an hour (never stale); unpolled = ready (wake_at an hour ago) but of a type the executor does not poll; each level starts from a TRUNCATEd table, VACUUM ANALYZEd before it is measured, as autovacuum would")
	return nil
}

// addBackground adds n tasks of idleType in state.
func addBackground(ctx context.Context, db *pgxpool.Pool, state string, n int) error {
	for n > 0 {
		b := min(n, idleBackgroundBatch)
		spec := tasks.Spec{Type: idleType, WakeAt: time.Now().Add(time.Hour)}
		if state == "unpolled" {
			spec = tasks.Spec{Type: unpolledType, WakeAt: time.Now().Add(-time.Hour)}
		}
		specs := make([]tasks.Spec, b)
		for i := range specs {
			specs[i] = spec
		}
		ids, err := tasks.CreateMany(ctx, db, specs)
		if err != nil {
			return err
		}
		switch state {
		case "suspended":
			_, err = db.Exec(ctx, "UPDATE corotask.tasks SET wake_at = NULL WHERE task_id = ANY($1)", ids)
		case "running":
			_, err = db.Exec(ctx, `UPDATE corotask.tasks SET heartbeat = now(), claim = gen_random_uuid(),
				claim_expires_at = now() + interval '1 hour' WHERE task_id = ANY($1)`, ids)
		}
		if err != nil {
			return err
		}
		n -= b
	}
	return nil
}

// measureClaim vacuums the table, then times PollOnce with nothing ready,
// then PollOnce of K ready tasks.
func (r *runner) measureClaim(ctx context.Context, db *pgxpool.Pool, ex *executor.Executor) (idleLevel, error) {
	var l idleLevel
	if _, err := db.Exec(ctx, "VACUUM ANALYZE corotask.tasks"); err != nil {
		return l, err
	}
	k := r.opts.K
	// The claim alone: nothing is ready, so PollOnce claims nothing.
	var ds []time.Duration
	for i := range r.opts.Iterations + 20 {
		start := time.Now()
		n, err := ex.PollOnce(ctx)
		if err != nil {
			return l, err
		}
		if n != 0 {
			return l, fmt.Errorf("PollOnce polled %d tasks, want none", n)
		}
		if i >= 20 { // warm-up: caches, prepared statement
			ds = append(ds, time.Since(start))
		}
	}
	l.claim = percentiles(ds, 50)[0]

	// The executor's whole path: claim, poll (Yield), commit, of the K ready
	// tasks (Yield leaves them ready for the next).
	if _, _, err := r.createTasks(ctx, db, k, tasks.Spec{Type: idleType, WakeAt: time.Now().Add(-time.Hour)}); err != nil {
		return l, err
	}
	var po []time.Duration
	for i := range r.opts.Iterations/3 + 5 {
		start := time.Now()
		n, err := ex.PollOnce(ctx)
		if err != nil {
			return l, err
		}
		if n != k {
			return l, fmt.Errorf("PollOnce polled %d tasks, want %d", n, k)
		}
		if i >= 5 {
			po = append(po, time.Since(start))
		}
	}
	l.pollOnce = percentiles(po, 50)[0]
	return l, nil
}
