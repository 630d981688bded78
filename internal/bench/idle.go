package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/claimsql"
	"github.com/corotask/corotask/tasks"
)

const (
	idleType tasks.Type = "bench.idle"
	// idleBackgroundBatch is how many background tasks one CreateMany makes.
	idleBackgroundBatch = 10_000
)

// claimSQL is the executor's claim statement, stale claims included.
var claimSQL = claimsql.SQL[true]

// claimArgs are the claim's arguments for k tasks of idleType, with the
// executor's default heartbeat timeout.
func claimArgs(k int) []any {
	types := []string{string(idleType)}
	return []any{types, k, []string{}, []int32{}, (30 * time.Second).Seconds(), types}
}

// backgroundStates are the states idle fills the table with.
var backgroundStates = []string{"sleeping", "suspended", "running"}

// idleLevel is what idle measured with one background.
type idleLevel struct {
	claimP50, claimMean float64 // ms, the claim statement alone
	pollOnce            float64 // ms, the executor's PollOnce of K ready tasks (p50)
	plan                planFigures
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
	ex := executor.New(db, executor.Config{Concurrency: o.K, Logger: r.log, Retention: -1})
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
			// The K ready tasks each claim takes (and gives back: rolled
			// back, or committed with Yield by PollOnce).
			if _, _, err := r.createTasks(ctx, db, o.K, tasks.Spec{Type: idleType, WakeAt: time.Now().Add(-time.Hour)}); err != nil {
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
			r.progress("%d tasks %s: claim of %d %.3f ms, PollOnce %.3f ms", level, state, o.K, l.claimP50, l.pollOnce)
			res.metric("claim_ms_"+label, l.claimP50)
			res.metric("claim_shared_hit_"+label, l.plan.sharedHit)
			res.metric("pollonce_ms_"+label, l.pollOnce)
			if level == 0 {
				base = l
				continue
			}
			res.metric("claim_ratio_"+label, l.claimP50/base.claimP50)
			res.metric("pollonce_ratio_"+label, l.pollOnce/base.pollOnce)
		}
	}
	res.note("claim_ms_*: p50 of the executor's claim statement (internal/claimsql) taking %d ready tasks, in a transaction rolled back each time; pollonce_ms_*: p50 of executor.PollOnce on the same %d tasks (claim, poll, commit with Yield); ratios are against the same state's 0", o.K, o.K)
	res.note("background: sleeping = wake_at in an hour; suspended = wake_at NULL; running = claim set, heartbeat in an hour (never stale); each level starts from a TRUNCATEd table, VACUUM ANALYZEd before it is measured, as autovacuum would")
	return nil
}

// addBackground adds n tasks of idleType in state.
func addBackground(ctx context.Context, db *pgxpool.Pool, state string, n int) error {
	for n > 0 {
		b := min(n, idleBackgroundBatch)
		specs := make([]tasks.Spec, b)
		for i := range specs {
			specs[i] = tasks.Spec{Type: idleType, WakeAt: time.Now().Add(time.Hour)}
		}
		ids, err := tasks.CreateMany(ctx, db, specs)
		if err != nil {
			return err
		}
		switch state {
		case "suspended":
			_, err = db.Exec(ctx, "UPDATE corotask.tasks SET wake_at = NULL WHERE task_id = ANY($1)", ids)
		case "running":
			_, err = db.Exec(ctx, `UPDATE corotask.tasks SET heartbeat = now() + interval '1 hour', claim = gen_random_uuid()
				WHERE task_id = ANY($1)`, ids)
		}
		if err != nil {
			return err
		}
		n -= b
	}
	return nil
}

// measureClaim vacuums the table, then times claims of the K ready tasks.
func (r *runner) measureClaim(ctx context.Context, db *pgxpool.Pool, ex *executor.Executor) (idleLevel, error) {
	var l idleLevel
	if _, err := db.Exec(ctx, "VACUUM ANALYZE corotask.tasks"); err != nil {
		return l, err
	}
	conn, err := db.Acquire(ctx)
	if err != nil {
		return l, err
	}
	defer conn.Release()
	k := r.opts.K
	claimOnce := func(explainIt bool) (time.Duration, error) {
		tx, err := conn.Begin(ctx)
		if err != nil {
			return 0, err
		}
		defer tx.Rollback(ctx) //nolint:errcheck
		if _, err := tx.Exec(ctx, claimsql.GenericPlan); err != nil {
			return 0, err
		}
		if explainIt {
			l.plan, err = explain(ctx, tx, claimSQL, claimArgs(k)...)
			return 0, err
		}
		start := time.Now()
		rows, err := tx.Query(ctx, claimSQL, claimArgs(k)...)
		if err != nil {
			return 0, err
		}
		n := 0
		for rows.Next() {
			n++
		}
		rows.Close()
		d := time.Since(start)
		if err := rows.Err(); err != nil {
			return 0, err
		}
		if n != k+1 {
			return 0, fmt.Errorf("claim returned %d rows, want %d", n, k+1)
		}
		return d, nil
	}
	var ds []time.Duration
	for i := range r.opts.Iterations + 20 {
		d, err := claimOnce(false)
		if err != nil {
			return l, err
		}
		if i >= 20 { // warm-up: caches, prepared statement
			ds = append(ds, d)
		}
	}
	if _, err := claimOnce(true); err != nil {
		return l, err
	}
	p := percentiles(ds, 50)
	l.claimP50, l.claimMean = p[0], mean(ds)

	// The executor's own path: claim, poll (Yield), commit.
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

// planFigures are what EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) says of a
// statement.
type planFigures struct {
	execMS    float64
	planMS    float64
	triggerMS float64
	sharedHit int64
	sharedRd  int64
}

// explain runs EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) of q.
func explain(ctx context.Context, db tasks.DB, q string, args ...any) (planFigures, error) {
	var raw []byte
	if err := db.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+q, args...).Scan(&raw); err != nil {
		return planFigures{}, err
	}
	var out []struct {
		Plan struct {
			SharedHit  int64 `json:"Shared Hit Blocks"`
			SharedRead int64 `json:"Shared Read Blocks"`
		} `json:"Plan"`
		Planning      float64 `json:"Planning Time"`
		Execution     float64 `json:"Execution Time"`
		PlanningStats struct {
			SharedHit int64 `json:"Shared Hit Blocks"`
		} `json:"Planning"`
		Triggers []struct {
			Name string  `json:"Trigger Name"`
			Time float64 `json:"Time"`
		} `json:"Triggers"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out) == 0 {
		return planFigures{}, fmt.Errorf("read EXPLAIN output: %v", err)
	}
	p := planFigures{execMS: out[0].Execution, planMS: out[0].Planning, sharedHit: out[0].Plan.SharedHit,
		sharedRd: out[0].Plan.SharedRead}
	for _, t := range out[0].Triggers {
		p.triggerMS += t.Time
	}
	return p, nil
}
