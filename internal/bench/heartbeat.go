package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync/atomic"
	"time"

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
	if o.MemProfile != "" {
		// Sample finely enough to see per-poll allocations of a few bytes.
		runtime.MemProfileRate = 1024
	}
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
	var msHeld, msLive runtime.MemStats
	runtime.ReadMemStats(&msHeld)
	rss, _ := rssBytes()
	runtime.GC()
	runtime.ReadMemStats(&msLive)
	goroutines := runtime.NumGoroutine()
	if o.MemProfile != "" {
		if err := writeProfiles(o.MemProfile); err != nil {
			return err
		}
	}

	close(release)
	released = true
	drainStart := time.Now()
	err = waitUntil(ctx, "the held polls to commit", 5*time.Minute, 50*time.Millisecond, func() (bool, error) {
		left, err := anyLive(ctx, db)
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
	u := cpu0.until(cpu1)
	res.metric("executor_cpu_pct", 100*u.self.Seconds()/window.Seconds())
	if u.pgOK {
		res.metric("postgres_cpu_pct", 100*u.postgres.Seconds()/window.Seconds())
		if stmts > 0 {
			// Nothing but renewals runs in the window: the server's CPU per
			// renewal statement.
			res.metric("postgres_cpu_ms_per_renewal", ms(u.postgres)/float64(stmts))
		}
	}
	res.metric("heap_inuse_bytes", float64(msHeld.HeapInuse-min(msHeld.HeapInuse, ms0.HeapInuse)))
	res.metric("heap_live_bytes", float64(msLive.HeapInuse-min(msLive.HeapInuse, ms0.HeapInuse)))
	res.metric("stack_inuse_bytes", float64(msLive.StackInuse))
	res.metric("live_bytes_per_poll", float64(msLive.HeapInuse-min(msLive.HeapInuse, ms0.HeapInuse)+msLive.StackInuse)/float64(o.M))
	res.metric("go_sys_bytes", float64(msHeld.Sys))
	res.metric("rss_bytes", float64(rss))
	res.metric("peak_rss_bytes", float64(peak))
	res.metric("goroutines", goroutines)
	res.metric("drain_sec", drain.Seconds())
	res.metric("drain_tasks_per_sec", rate(o.M, drain))
	res.note("heartbeat_statements counts UPDATE statements on corotask.tasks with a statement trigger while all M polls are held (no claims or commits then); rows_renewed_per_sec is pg_stat_user_tables.n_tup_upd (flushed by the server about once a second, so +-1 renewal); postgres_cpu_ms_per_renewal is the CPU of the scenario's backends in the window over the renewal statements")
	res.note("memory and CPU are this process's, which runs the executor; heap_inuse_bytes is the heap's growth since before the executor started, heap_live_bytes the same after a GC; rss_bytes is the process's resident set while the polls are held")
	return nil
}

// writeProfiles writes the heap profile to path and the goroutine profile
// to path.goroutine.
func writeProfiles(path string) error {
	for _, p := range []struct{ name, file string }{{"heap", path}, {"goroutine", path + ".goroutine"}} {
		f, err := os.Create(p.file)
		if err != nil {
			return fmt.Errorf("%s profile: %w", p.name, err)
		}
		err = pprof.Lookup(p.name).WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("%s profile: %w", p.name, err)
		}
	}
	return nil
}
