package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/tasks"
)

const limitType tasks.Type = "bench.limit"

// limitPoller ends every task at its first poll, after pollTime, and
// records the poll's start and end in spans: the poll function runs within
// the task's claim, so polls that overlap held their claims at once.
func limitPoller(pollTime time.Duration, first *firstTime, polls *atomic.Int64, spans *pollSpans) executor.PollerFunc[struct{}, json.RawMessage] {
	return func(ctx context.Context, t *executor.Task[struct{}, json.RawMessage]) (executor.Action, error) {
		start := time.Now()
		if polls.Add(1) == 1 {
			first.see(start)
		}
		if pollTime > 0 {
			time.Sleep(pollTime)
		}
		spans.add(start, time.Now())
		return executor.Done(), nil
	}
}

// limitRun is what one round of one variant of the limit scenario measured.
type limitRun struct {
	tasksPerSec float64
	overlap     overlap
	polls       int64
}

// runLimit: N tasks per round, polled once each by Executors executors
// (worker processes unless InProcess) with Workers slots in all, in
// rounds without a fleet-wide maximum (no corotask.type_controls row) and
// with MaxRunning, alternating. The polls' own start and end times, merged
// over the executors, say how many ran at once: checkLimit fails the run
// when more than MaxRunning did with the limit.
func runLimit(ctx context.Context, r *runner, res *Result) error {
	o := r.opts
	mode := "processes"
	if o.Executors == 1 || o.InProcess {
		mode = "in-process"
	}
	binding := o.MaxRunning < o.Workers
	res.param("n", o.N)
	res.param("workers", o.Workers)
	res.param("executors", o.Executors)
	res.param("mode", mode)
	res.param("max_running", o.MaxRunning)
	res.param("binding", binding)
	res.param("rounds", o.Rounds)
	res.param("poll_time", o.PollTime)
	res.param("pool", o.Pool)

	db, err := r.pool(ctx, 4)
	if err != nil {
		return err
	}
	defer db.Close()
	var tps [2][]float64 // by variant: 0 without the limit, 1 with it
	var worst [2]overlap // the round with the most polls at once, by variant
	var meanRun [2][]float64
	for round := 1; round <= o.Rounds; round++ {
		for v, limited := range []bool{false, true} {
			label := limitVariant(limited)
			r.progress("round %d/%d, %s: %d tasks", round, o.Rounds, label, o.N)
			run, err := r.limitRound(ctx, db, mode, limited)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round, label, err)
			}
			r.progress("round %d/%d, %s: %.0f tasks/s, at most %d polls at once (mean %.1f)",
				round, o.Rounds, label, run.tasksPerSec, run.overlap.max, run.overlap.mean)
			tps[v] = append(tps[v], run.tasksPerSec)
			meanRun[v] = append(meanRun[v], run.overlap.mean)
			if run.overlap.max > worst[v].max {
				worst[v] = run.overlap
			}
			res.Series = append(res.Series, Fields{
				{"round", round}, {"variant", label}, {"tasks_per_sec", run.tasksPerSec}, {"polls", run.polls},
				{"max_overlap", run.overlap.max}, {"mean_running", run.overlap.mean},
			})
		}
	}
	un, lim := median(tps[0]), median(tps[1])
	res.metric("unlimited_tasks_per_sec", un)
	res.metric("limited_tasks_per_sec", lim)
	res.metric("limited_vs_unlimited", lim/un)
	res.metric("max_overlap_unlimited", worst[0].max)
	res.metric("max_overlap_limited", worst[1].max)
	res.metric("mean_running_unlimited", median(meanRun[0]))
	res.metric("mean_running_limited", median(meanRun[1]))
	res.metric("limit_exceeded_by", max(0, worst[1].max-o.MaxRunning))
	res.note("tasks_per_sec = n / (latest done_at - start of the first poll), per round; the figures are the medians over the rounds; limited_vs_unlimited is their ratio")
	res.note("max_overlap = the most polls running at once, counted from each poll's own start and end (wall clock, taken inside the poll function, within its claim), merged over all executors; mean_running is the time-weighted mean")
	if binding {
		res.note("the limit binds (-max-running %d < -workers %d): max_overlap_limited must not exceed it", o.MaxRunning, o.Workers)
	} else {
		res.note("the limit does not bind (-max-running %d >= -workers %d): the run compares throughput; a limit below -workers checks enforcement", o.MaxRunning, o.Workers)
	}
	return nil
}

// checkLimit fails a limit result whose polls ran more at once than the
// limit allows.
func checkLimit(res *Result) error {
	limit, seen := res.Params.Float("max_running"), res.Metrics.Float("max_overlap_limited")
	if seen > limit {
		return fmt.Errorf("the limit was not held: %.0f polls ran at once with max_running %.0f (counted from the polls' own start and end times, over all executors)",
			seen, limit)
	}
	return nil
}

// resultChecks are the checks of the scenarios whose results can fail, by
// scenario: Run prints the result, then fails with the check's error.
var resultChecks = map[string]func(res *Result) error{
	"limit": checkLimit,
}

func limitVariant(limited bool) string {
	if limited {
		return "limited"
	}
	return "unlimited"
}

// limitRound runs one round: a fresh table of N tasks, the type's limit set
// or removed, executors started together and stopped once every task is
// done.
func (r *runner) limitRound(ctx context.Context, db *pgxpool.Pool, mode string, limited bool) (limitRun, error) {
	o := r.opts
	var run limitRun
	if _, err := db.Exec(ctx, "TRUNCATE corotask.tasks"); err != nil {
		return run, err
	}
	if err := setMaxRunning(ctx, db, limitType, limited, o.MaxRunning); err != nil {
		return run, err
	}
	if _, _, err := r.createTasks(ctx, db, o.N, tasks.Spec{Type: limitType}); err != nil {
		return run, err
	}
	if err := r.analyze(ctx, db); err != nil {
		return run, err
	}
	var (
		first firstTime
		polls atomic.Int64
		spans pollSpans
		grp   *group
		ps    procs
		err   error
	)
	if mode == "in-process" {
		grp, err = r.startExecutors(ctx, o.Executors, o.Workers, r.executorConfig(0), func(e *executor.Executor) {
			executor.Register(e, limitType, limitPoller(o.PollTime, &first, &polls, &spans), r.typeOptions()...)
		})
	} else {
		ps, err = r.startHeldWorkers(ctx, split(o.Workers, o.Executors))
		if err == nil {
			if err = ps.release(); err != nil {
				ps.kill()
			}
		}
	}
	if err != nil {
		return run, err
	}
	stopAll := func() ([]workerReport, error) {
		if grp != nil {
			return nil, grp.stop()
		}
		return ps.stop(context.WithoutCancel(ctx))
	}
	timeout := max(2*time.Minute, time.Duration(o.N)*time.Millisecond)
	err = waitUntil(ctx, "every task done", timeout, 100*time.Millisecond, func() (bool, error) {
		left, err := anyLive(ctx, db)
		return !left, err
	})
	if err != nil {
		_, _ = stopAll()
		return run, err
	}
	last, err := latestDone(ctx, db)
	if err != nil {
		_, _ = stopAll()
		return run, err
	}
	reps, err := stopAll()
	if err != nil {
		return run, err
	}
	flat := spans.flat()
	for _, rep := range reps {
		polls.Add(rep.Polls)
		if rep.FirstPollUnixNano != 0 {
			first.see(time.Unix(0, rep.FirstPollUnixNano))
		}
		flat = append(flat, rep.Intervals...)
	}
	start := first.get()
	if start.IsZero() {
		return run, fmt.Errorf("no poll started")
	}
	var done int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM corotask.tasks WHERE outcome = 'done'").Scan(&done); err != nil {
		return run, err
	}
	if done != o.N {
		return run, fmt.Errorf("%d of %d tasks done", done, o.N)
	}
	run.polls = polls.Load()
	run.tasksPerSec = rate(o.N, last.Sub(start))
	run.overlap = measureOverlap(flat)
	if int64(run.overlap.intervals) != run.polls {
		return run, fmt.Errorf("%d polls reported %d intervals", run.polls, run.overlap.intervals)
	}
	return run, nil
}

// startHeldWorkers starts one worker process of kind "limit" per entry of
// concurrency, each held once ready until procs.release, so that they
// start polling together.
func (r *runner) startHeldWorkers(ctx context.Context, concurrency []int) (procs, error) {
	var ps procs
	for i, c := range concurrency {
		spec := r.workerSpec("limit", c, i+1)
		spec.PollTime, spec.Hold = r.opts.PollTime, true
		p, err := r.startWorker(ctx, spec)
		if err != nil {
			ps.kill()
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// setMaxRunning gives typ a fleet-wide maximum of n running polls, or,
// when not on, removes its controls (a type without a row has none).
func setMaxRunning(ctx context.Context, db *pgxpool.Pool, typ tasks.Type, on bool, n int) error {
	var err error
	if on {
		_, err = db.Exec(ctx, `INSERT INTO corotask.type_controls (task_type, max_running) VALUES ($1, $2)
			ON CONFLICT (task_type) DO UPDATE SET max_running = EXCLUDED.max_running`, string(typ), n)
	} else {
		_, err = db.Exec(ctx, "DELETE FROM corotask.type_controls WHERE task_type = $1", string(typ))
	}
	if err != nil {
		return fmt.Errorf("set the max_running of %s: %w", typ, err)
	}
	return nil
}

// median returns the median of fs (NaN for none).
func median(fs []float64) float64 {
	if len(fs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(fs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
