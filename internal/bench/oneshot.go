package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/tasks"
)

const oneshotType tasks.Type = "bench.oneshot"

// oneshotPoller ends every task at its first poll, noting when the first
// poll started and counting polls.
func oneshotPoller(first *firstTime, polls *atomic.Int64) executor.PollerFunc[struct{}, json.RawMessage] {
	return func(ctx context.Context, t *executor.Task[struct{}, json.RawMessage]) (executor.Action, error) {
		if polls.Add(1) == 1 {
			first.see(time.Now())
		}
		return executor.Done(), nil
	}
}

// runOneshot: N tasks created in bulk, then polled once each to Done by
// Executors executors with Workers slots in all; tasks/s from the first
// claim to the last commit.
func runOneshot(ctx context.Context, r *runner, res *Result) error {
	o := r.opts
	mode := "processes"
	if o.Executors == 1 || o.InProcess {
		mode = "in-process"
	}
	res.param("n", o.N)
	res.param("workers", o.Workers)
	res.param("executors", o.Executors)
	res.param("mode", mode)
	res.param("pool", o.Pool)
	res.param("batch", o.Batch)
	res.param("otel", o.OTel)

	db, err := r.pool(ctx, 4)
	if err != nil {
		return err
	}
	defer db.Close()
	r.progress("creating %d tasks", o.N)
	_, createDur, err := r.createTasks(ctx, db, o.N, tasks.Spec{Type: oneshotType})
	if err != nil {
		return err
	}
	res.metric("create_per_sec", rate(o.N, createDur))
	if err := r.analyze(ctx, db); err != nil {
		return err
	}
	wal0, err := walLSN(ctx, db)
	if err != nil {
		return err
	}

	stats0, err := readTableStats(ctx, db)
	if err != nil {
		return err
	}
	r.progress("polling them with %d executor(s) (%s), %d workers", o.Executors, mode, o.Workers)
	cpu0 := sampleCPU(ctx, db)
	var (
		first firstTime
		polls atomic.Int64
		grp   *group
		ps    procs
	)
	if mode == "in-process" {
		grp, err = r.startExecutors(ctx, o.Executors, o.Workers, r.executorConfig(0), func(e *executor.Executor) {
			executor.Register(e, oneshotType, oneshotPoller(&first, &polls), r.typeOptions()...)
		})
	} else {
		ps, err = r.startWorkers(ctx, "oneshot", split(o.Workers, o.Executors))
	}
	if err != nil {
		return err
	}
	stopAll := func() ([]workerReport, error) {
		if grp != nil {
			return nil, grp.stop()
		}
		return ps.stop(context.WithoutCancel(ctx))
	}
	timeout := max(2*time.Minute, time.Duration(o.N)*time.Millisecond)
	err = waitUntil(ctx, "every task done", timeout, 200*time.Millisecond, func() (bool, error) {
		if grp != nil && polls.Load() < int64(o.N) {
			return false, nil
		}
		left, err := anyLive(ctx, db)
		return !left, err
	})
	cpu1 := sampleCPU(ctx, db)
	if err != nil {
		_, _ = stopAll()
		return err
	}
	last, err := latestDone(ctx, db)
	if err != nil {
		_, _ = stopAll()
		return err
	}
	reps, err := stopAll()
	if err != nil {
		return err
	}
	stats1, err := readTableStats(ctx, db)
	if err != nil {
		return err
	}
	execCPU := cpu0.until(cpu1).self
	if grp == nil {
		execCPU = 0
		for _, rep := range reps {
			polls.Add(rep.Polls)
			if rep.FirstPollUnixNano != 0 {
				first.see(time.Unix(0, rep.FirstPollUnixNano))
			}
			execCPU += time.Duration(rep.CPUNano)
		}
	}
	start := first.get()
	if start.IsZero() {
		return fmt.Errorf("no poll started")
	}
	elapsed := last.Sub(start)
	wal1, err := walLSN(ctx, db)
	if err != nil {
		return err
	}
	var done int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM corotask.tasks WHERE outcome = 'done'").Scan(&done); err != nil {
		return err
	}
	if done != o.N {
		return fmt.Errorf("%d of %d tasks done", done, o.N)
	}
	res.metric("tasks_done", done)
	res.metric("polls", polls.Load())
	res.metric("run_sec", elapsed.Seconds())
	res.metric("tasks_per_sec", rate(o.N, elapsed))
	res.metric("wal_bytes_per_task", float64(wal1-wal0)/float64(o.N))
	addTableStats(res, stats0, stats1)
	u := cpu0.until(cpu1)
	res.metric("executor_cpu_us_per_task", float64(execCPU.Microseconds())/float64(o.N))
	if u.pgOK {
		res.metric("postgres_cpu_us_per_task", float64(u.postgres.Microseconds())/float64(o.N))
	}
	if u.ok {
		res.metric("machine_cpu_busy_pct", 100*u.busy)
		res.metric("machine_iowait_pct", 100*u.iowait)
	}
	res.note("tasks_per_sec = n / (latest done_at - start of the first poll); create_per_sec is the CreateMany phase before it")
	if mode == "in-process" && o.Executors > 1 {
		res.note("the %d executors ran in this process, each with its own pool (-in-process)", o.Executors)
	}
	return nil
}
