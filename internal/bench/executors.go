package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/executor"
)

// split divides total slots among n executors, as evenly as possible.
func split(total, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = total / n
		if i < total%n {
			out[i]++
		}
	}
	return out
}

// group is executors running in this process, each with its own pool.
type group struct {
	pools  []*pgxpool.Pool
	cancel context.CancelFunc
	errs   chan error
	n      int
	prof   *os.File
}

// executorConfig is the executor configuration the scenarios use: the
// defaults, but for concurrency, quiet logs and retention (off unless
// asked: scenarios count the tasks they ran).
func (r *runner) executorConfig(concurrency int) executor.Config {
	cfg := executor.Config{Concurrency: concurrency, Logger: r.log, Retention: -1, DisableEagerChildren: r.opts.NoEager}
	if r.opts.OTel {
		cfg.Hooks, _ = otelHooks() // Run checked the error
	}
	return cfg
}

// typeOptions are the options every scenario registers its types with.
func (r *runner) typeOptions() []executor.Option {
	return []executor.Option{executor.History(r.opts.History != "off")}
}

// waitAction is how tree and fanin parents wait for their children
// (Options.Wait).
func (r *runner) waitAction() executor.Action {
	if r.opts.Wait == "suspend" {
		return executor.Suspend()
	}
	return executor.AwaitChildren()
}

// startExecutors starts n executors in this process sharing concurrency
// slots, each on its own pool of Options.Pool connections, configured by
// cfg (Concurrency is overridden) with pollers registered by register.
// With Options.CPUProfile, the CPU profile runs until stop.
func (r *runner) startExecutors(ctx context.Context, n, concurrency int, cfg executor.Config,
	register func(e *executor.Executor)) (*group, error) {
	g := &group{errs: make(chan error, n), n: n}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	g.cancel = cancel
	var execs []*executor.Executor
	for _, c := range split(concurrency, n) {
		pool, err := r.pool(ctx, r.opts.Pool)
		if err != nil {
			g.close()
			return nil, err
		}
		g.pools = append(g.pools, pool)
		ec := cfg
		ec.Concurrency = c
		e, err := executor.New(pool, ec)
		if err != nil {
			g.close()
			return nil, err
		}
		register(e)
		execs = append(execs, e)
	}
	if r.opts.CPUProfile != "" {
		f, err := os.Create(r.opts.CPUProfile)
		if err != nil {
			g.close()
			return nil, fmt.Errorf("cpu profile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			g.close()
			return nil, fmt.Errorf("cpu profile: %w", err)
		}
		g.prof = f
	}
	for _, e := range execs {
		go func() { g.errs <- e.Run(runCtx) }()
	}
	return g, nil
}

// stop stops the executors gracefully and closes their pools. Calling it
// again does nothing.
func (g *group) stop() error {
	g.cancel()
	var errs []error
	for range g.n {
		errs = append(errs, <-g.errs)
	}
	g.n = 0
	g.close()
	return errors.Join(errs...)
}

// cleanup is stop for a deferred call on an error path.
func (g *group) cleanup() { _ = g.stop() }

func (g *group) close() {
	if g.prof != nil {
		pprof.StopCPUProfile()
		g.prof.Close()
		g.prof = nil
	}
	for _, p := range g.pools {
		p.Close()
	}
	g.pools = nil
	g.cancel()
}

// firstTime keeps the earliest of the times it is given.
type firstTime struct {
	mu sync.Mutex
	t  time.Time
}

func (f *firstTime) see(t time.Time) {
	f.mu.Lock()
	if f.t.IsZero() || t.Before(f.t) {
		f.t = t
	}
	f.mu.Unlock()
}

func (f *firstTime) get() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}
