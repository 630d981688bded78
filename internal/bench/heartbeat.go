package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/tasks"
)

const holdType tasks.Type = "bench.hold"

// countStatementsSQL installs, in the scenario's own database, a statement
// trigger that counts UPDATE statements on the tasks table: while every poll
// is held in flight, the only UPDATEs are the heartbeat keeper's renewals.
const countStatementsSQL = `
CREATE SEQUENCE corotask.bench_updates;
CREATE FUNCTION corotask.bench_count_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM nextval('corotask.bench_updates');
    RETURN NULL;
END $$;
CREATE TRIGGER bench_count_update AFTER UPDATE ON corotask.tasks
    FOR EACH STATEMENT EXECUTE FUNCTION corotask.bench_count_update();`

// runHeartbeat: M polls held in flight for Duration; heartbeat statements
// per second, their cost, and the executor's CPU and memory.
func runHeartbeat(ctx context.Context, r *runner, res *Result) error {
	o := r.opts
	res.param("m", o.M)
	res.param("duration", o.Duration)
	res.param("heartbeat_interval", o.HeartbeatInterval)
	res.param("pool", o.Pool)
	db, err := r.pool(ctx, 2)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.Exec(ctx, countStatementsSQL); err != nil {
		return fmt.Errorf("install the statement counter: %w", err)
	}
	r.progress("creating %d tasks", o.M)
	if _, _, err := r.createTasks(ctx, db, o.M, tasks.Spec{Type: holdType}); err != nil {
		return err
	}
	if err := r.analyze(ctx, db); err != nil {
		return err
	}

	var inflight atomic.Int64
	full := make(chan struct{})
	release := make(chan struct{})
	poller := executor.PollerFunc[struct{}, json.RawMessage](func(ctx context.Context, t *executor.Task[struct{}, json.RawMessage]) (executor.Action, error) {
		if inflight.Add(1) == int64(o.M) {
			close(full)
		}
		select {
		case <-release:
		case <-ctx.Done():
			return executor.Action{}, context.Cause(ctx)
		}
		return executor.Done(), nil
	})
	runtime.GC()
	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cfg := r.executorConfig(0)
	cfg.HeartbeatInterval = o.HeartbeatInterval
	cfg.HeartbeatTimeout = max(30*time.Second, 3*o.HeartbeatInterval)
	grp, err := r.startExecutors(ctx, 1, o.M, cfg, func(e *executor.Executor) {
		executor.Register(e, holdType, poller)
	})
	if err != nil {
		return err
	}
	defer grp.cleanup()
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	start := time.Now()
	r.progress("claiming %d tasks", o.M)
	select {
	case <-full:
	case <-time.After(5 * time.Minute):
		return fmt.Errorf("only %d of %d polls started", inflight.Load(), o.M)
	case <-ctx.Done():
		return ctx.Err()
	}
	res.metric("fill_sec", time.Since(start).Seconds())

	r.progress("holding %d polls for %s", o.M, o.Duration)
	counter := func() (stmts, tupUpd int64, err error) {
		err = db.QueryRow(ctx, `SELECT (SELECT last_value - CASE WHEN is_called THEN 0 ELSE 1 END FROM corotask.bench_updates),
			(SELECT n_tup_upd FROM pg_stat_user_tables WHERE relid = 'corotask.tasks'::regclass)`).Scan(&stmts, &tupUpd)
		return stmts, tupUpd, err
	}
	s0, u0, err := counter()
	if err != nil {
		return err
	}
	cpu0 := sampleCPU(ctx, db)
	t := time.NewTimer(o.Duration)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
	cpu1 := sampleCPU(ctx, db)
	s1, u1, err := counter()
	if err != nil {
		return err
	}
	var msHeld runtime.MemStats
	runtime.ReadMemStats(&msHeld)
	rss, _ := rssBytes()
	goroutines := runtime.NumGoroutine()

	// The cost of one renewal: the keeper's statement, run once more here
	// with the same claims.
	renewPlan, renewErr := explainRenewal(ctx, db)

	close(release)
	released = true
	drainStart := time.Now()
	err = waitUntil(ctx, "the held polls to commit", 5*time.Minute, 50*time.Millisecond, func() (bool, error) {
		var left bool
		err := db.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM corotask.tasks WHERE done_at IS NULL)").Scan(&left)
		return !left, err
	})
	if err != nil {
		return err
	}
	drain := time.Since(drainStart)
	if err := grp.stop(); err != nil {
		return err
	}
	_, peak := rssBytes()

	window := cpu1.at.Sub(cpu0.at)
	stmts := s1 - s0
	res.metric("heartbeat_statements", stmts)
	res.metric("heartbeat_statements_per_sec", rate(int(stmts), window))
	res.metric("expected_per_sec", 1/o.HeartbeatInterval.Seconds())
	res.metric("rows_renewed_per_sec", rate(int(u1-u0), window))
	if renewErr == nil {
		res.metric("renewal_ms", renewPlan.execMS)
		res.metric("renewal_trigger_ms", renewPlan.triggerMS)
		res.metric("renewal_shared_hit", renewPlan.sharedHit)
	} else {
		res.note("EXPLAIN of the renewal failed: %v", renewErr)
	}
	u := cpu0.until(cpu1)
	res.metric("executor_cpu_pct", 100*u.self.Seconds()/window.Seconds())
	if u.pgOK {
		res.metric("postgres_cpu_pct", 100*u.postgres.Seconds()/window.Seconds())
	}
	res.metric("heap_inuse_bytes", float64(msHeld.HeapInuse-min(msHeld.HeapInuse, ms0.HeapInuse)))
	res.metric("stack_inuse_bytes", float64(msHeld.StackInuse))
	res.metric("bytes_per_poll", float64(msHeld.HeapInuse-min(msHeld.HeapInuse, ms0.HeapInuse)+msHeld.StackInuse)/float64(o.M))
	res.metric("go_sys_bytes", float64(msHeld.Sys))
	res.metric("rss_bytes", float64(rss))
	res.metric("peak_rss_bytes", float64(peak))
	res.metric("goroutines", goroutines)
	res.metric("drain_sec", drain.Seconds())
	res.metric("drain_tasks_per_sec", rate(o.M, drain))
	res.note("heartbeat_statements counts UPDATE statements on corotask.tasks with a statement trigger while all M polls are held (no claims or commits then); rows_renewed_per_sec is pg_stat_user_tables.n_tup_upd (flushed by the server about once a second, so +-1 renewal)")
	res.note("memory and CPU are this process's, which runs the executor (heap_inuse_bytes: growth since before it started)")
	return nil
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

// explainRenewal runs the heartbeat keeper's renewal statement (as in
// heartbeat/keeper.go) for every running task, under EXPLAIN ANALYZE.
func explainRenewal(ctx context.Context, db tasks.DB) (planFigures, error) {
	rows, err := db.Query(ctx, "SELECT task_id, claim FROM corotask.tasks WHERE claim IS NOT NULL")
	if err != nil {
		return planFigures{}, err
	}
	var ids []tasks.ID
	var tokens []pgtype.UUID
	for rows.Next() {
		var id tasks.ID
		var tok pgtype.UUID
		if err := rows.Scan(&id, &tok); err != nil {
			rows.Close()
			return planFigures{}, err
		}
		ids, tokens = append(ids, id), append(tokens, tok)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return planFigures{}, err
	}
	return explain(ctx, db, `UPDATE corotask.tasks t SET heartbeat = now()
		FROM unnest($1::uuid[], $2::uuid[]) AS c(task_id, claim)
		WHERE t.task_id = c.task_id AND t.claim = c.claim
		RETURNING t.task_id`, ids, tokens)
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
