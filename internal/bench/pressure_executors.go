package bench

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/corotask/corotask/executor"
)

// pressureExecutors are the pressure scenario's executors: worker
// processes of kind "pressure" (one per slot), or executors in this process
// with Options.InProcess. The executors have executor.Config's defaults but
// for Concurrency (their share of Options.Workers) and Logger.
type pressureExecutors struct {
	r *runner
	// Worker processes: those running, by slot; the reports and errors of
	// those stopped so far; how many were started.
	mu      sync.Mutex
	procs   []*workerProc
	reports []workerReport
	errs    []error
	started int
	// In this process.
	grp   *group
	tally *logTally
	polls atomic.Int64
}

func startPressureExecutors(ctx context.Context, r *runner) (*pressureExecutors, error) {
	o := r.opts
	x := &pressureExecutors{r: r}
	if o.InProcess {
		x.tally = newLogTally(r.stderr)
		cfg := executor.Config{Logger: slog.New(x.tally)}
		if o.OTel {
			cfg.Hooks, _ = otelHooks() // Run checked the error
		}
		grp, err := r.startExecutors(ctx, o.Executors, o.Workers, cfg, func(e *executor.Executor) {
			executor.Register(e, pressureType, pressurePoller(&x.polls), r.typeOptions()...)
		})
		if err != nil {
			return nil, err
		}
		x.grp = grp
		return x, nil
	}
	for _, c := range split(o.Workers, o.Executors) {
		x.started++
		p, err := r.startWorker(ctx, r.workerSpec("pressure", c, x.started))
		if err != nil {
			x.kill()
			return nil, err
		}
		x.procs = append(x.procs, p)
	}
	return x, nil
}

// restart stops the worker process of slot with SIGTERM, as a service
// manager would, waits for it to exit, and starts another in its place. It
// returns the stopped process and how long it took to exit.
func (x *pressureExecutors) restart(ctx context.Context, slot int) (stopped *workerProc, exit time.Duration, err error) {
	x.mu.Lock()
	p := x.procs[slot]
	x.started++
	spec := x.r.workerSpec("pressure", split(x.r.opts.Workers, x.r.opts.Executors)[slot], x.started)
	x.mu.Unlock()
	t := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return nil, 0, fmt.Errorf("stop worker: %w", err)
	}
	rep, rerr := p.report(ctx)
	exit = time.Since(t)
	np, err := x.r.startWorker(ctx, spec)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.reports = append(x.reports, rep)
	if rerr != nil {
		x.errs = append(x.errs, fmt.Errorf("worker stopped with SIGTERM: %w", rerr))
	}
	x.procs[slot] = np // nil when it did not start
	return p, exit, err
}

// stop stops every executor gracefully, and returns the polls they started
// and their log counts; what went wrong in them is noted in res.
func (x *pressureExecutors) stop(ctx context.Context, res *Result) (int64, map[string]int64) {
	if x.grp != nil {
		if err := x.grp.stop(); err != nil {
			res.note("an executor's Run failed: %v", err)
		}
		return x.polls.Load(), x.tally.counts()
	}
	x.mu.Lock()
	var ps procs
	for _, p := range x.procs {
		if p != nil {
			ps = append(ps, p)
		}
	}
	x.procs = nil
	x.mu.Unlock()
	reps, err := ps.stop(context.WithoutCancel(ctx))
	x.mu.Lock()
	defer x.mu.Unlock()
	x.reports = append(x.reports, reps...)
	if err != nil {
		x.errs = append(x.errs, err)
	}
	var polls int64
	logs := map[string]int64{}
	for _, rep := range x.reports {
		polls += rep.Polls
		for k, n := range rep.Logs {
			logs[k] += n
		}
	}
	for _, err := range x.errs {
		res.note("worker process: %v", err)
	}
	res.metric("worker_errors", len(x.errs))
	return polls, logs
}

// kill ends whatever still runs, on an error path.
func (x *pressureExecutors) kill() {
	if x.grp != nil {
		x.grp.cleanup()
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, p := range x.procs {
		if p != nil {
			procs{p}.kill()
		}
	}
	x.procs = nil
}
