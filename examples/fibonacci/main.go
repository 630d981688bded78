// Command fibonacci computes Fibonacci numbers the slow way, to show
// parent/child fan-out and fan-in with corotask.
//
// The task for fib(n) spawns two children, for fib(n-1) and fib(n-2), and
// suspends. Each child's result reaches its parent as a completion message;
// the parent sums them, and ends with the sum once both have arrived. fib(0)
// and fib(1) end at once. fib(n) so makes 2·fib(n+1)-1 tasks: 21891 for n=20.
//
// Run everything in one process, on the default database (see below):
//
//	go run ./examples/fibonacci
//	go run ./examples/fibonacci -n 20 -workers 50 -executors 2
//
// which prints the root task's ID, then the result, for example
//
//	root task 01M80BTYK7RT0QP2G2MJG2XGBA computes fib(16)
//	fib(16) = 987 in 3.79s (3193 tasks, 843 tasks/s)
//
// Or run it as several processes on one database: start executors in two
// terminals,
//
//	go run ./examples/fibonacci -role work
//	go run ./examples/fibonacci -role work
//
// then, in a third, create the root task and wait for its result:
//
//	go run ./examples/fibonacci -role submit
//
// The workers share the tree between them; each says how many polls it made
// when stopped with Ctrl-C. A worker stopped with Ctrl-C in the middle of a
// run gives its tasks back at once; one that is killed (kill -9) holds them
// until its heartbeats are 30 seconds old (Config.HeartbeatTimeout), when the
// other workers take them over. Either way the result is the same.
//
// Flags:
//
//	-n N              compute fib(N) (default 16)
//	-role R           all (default): executors and submit in this process;
//	                  work: only run executors, until interrupted;
//	                  submit: only create the root task and wait for its result
//	-workers W        polls each executor runs at once (Config.Concurrency, default 100)
//	-executors K      executors in this process, each with its own pool (default 1)
//	--database-url U  the PostgreSQL URL (default $DATABASE_URL, else libpq's
//	                  PG* variables, else database corotask on 127.0.0.1:5432,
//	                  created when missing)
//	-v                debug logs
//
// The time is measured by the database, from the root's creation to its end.
// The count of tasks comes from the results themselves: each task's result
// says how many tasks its subtree made. Tasks of earlier runs are left in the
// database (ended tasks are deleted after the executor's retention period,
// 7 days); the unfinished tasks of a run that was interrupted are finished by
// the executors of the next.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/executor"
	corosql "github.com/corotask/corotask/sql"
	"github.com/corotask/corotask/tasks"
)

// fibType is the task type of every task of the tree.
const fibType tasks.Type = "fibonacci.fib"

// maxN bounds -n: fib(30) already makes 2692537 tasks.
const maxN = 30

// config is what the flags set.
type config struct {
	DatabaseURL string
	N           int
	Role        string // "all", "work" or "submit"
	Workers     int    // executor.Config.Concurrency
	Executors   int    // executors in this process
	Logger      *slog.Logger
}

func main() {
	var cfg config
	var verbose bool
	flag.StringVar(&cfg.DatabaseURL, "database-url", "", "the PostgreSQL `URL` (default: $DATABASE_URL, else libpq's PG* variables, else database corotask on 127.0.0.1:5432, created when missing)")
	flag.IntVar(&cfg.N, "n", 16, "compute fib(`N`)")
	flag.StringVar(&cfg.Role, "role", "all", "all: executors and submit in this process; work: only executors, until interrupted; submit: only create the root and wait for its result")
	flag.IntVar(&cfg.Workers, "workers", 100, "polls each executor runs at once")
	flag.IntVar(&cfg.Executors, "executors", 1, "executors in this process, each with its own connection pool")
	flag.BoolVar(&verbose, "v", false, "debug logs")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "fibonacci: unexpected arguments %q\n", flag.Args())
		flag.Usage()
		os.Exit(2)
	}
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelDebug
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fibonacci:", err)
		os.Exit(1)
	}
}

// fibState is the durable state of one task.
type fibState struct {
	N       int  `json:"n"`
	Spawned bool `json:"spawned,omitempty"`
	Pending int  `json:"pending,omitempty"` // children whose result has not arrived
	Value   int  `json:"value,omitempty"`   // the sum of the results that arrived
	Tasks   int  `json:"tasks,omitempty"`   // this task and the subtrees that ended
}

// fibResult is what a task ends with, and so the body of the completion
// message its parent receives.
type fibResult struct {
	Value int `json:"value"` // fib(N)
	Tasks int `json:"tasks"` // how many tasks computing it made, this one included
}

// fibPoller polls fibonacci.fib tasks. Its messages are the completion
// messages of its children, whose bodies decode into fibResult.
type fibPoller struct {
	log   *slog.Logger
	polls atomic.Int64
}

func (p *fibPoller) Poll(ctx context.Context, t *executor.Task[fibState, fibResult]) (executor.Action, error) {
	p.polls.Add(1)
	s := &t.State
	if !s.Spawned {
		if s.N < 2 {
			return executor.DoneWith(fibResult{Value: s.N, Tasks: 1}), nil
		}
		// Fan out: both children are created when this poll commits.
		t.Spawn(fibType, fibState{N: s.N - 1}, nil)
		t.Spawn(fibType, fibState{N: s.N - 2}, nil)
		s.Spawned, s.Pending, s.Tasks = true, 2, 1
		// Polled again when both have ended (or another message arrives),
		// not at each completion.
		return executor.AwaitChildren(), nil
	}
	// Fan in: one completion message per child, in whatever order they end.
	for {
		m, ok := t.Inbox.Pop()
		if !ok {
			break
		}
		if !m.Done {
			p.log.Warn("ignoring a message that is not a child's result", "task", t.ID, "from", m.From)
			continue
		}
		if m.Err != "" {
			// A child failed or was canceled: so does this task, and its
			// parent is told in turn (this type is registered with
			// MaxFailures(1)).
			return executor.Action{}, fmt.Errorf("fib(%d): child %s ended without a result: %s", s.N, m.From, m.Err)
		}
		s.Value += m.Body.Value
		s.Tasks += m.Body.Tasks
		s.Pending--
	}
	if s.Pending > 0 {
		return executor.AwaitChildren(), nil
	}
	return executor.DoneWith(fibResult{Value: s.Value, Tasks: s.Tasks}), nil
}

func run(ctx context.Context, cfg config, stdout io.Writer) error {
	if cfg.N < 0 || cfg.N > maxN {
		return fmt.Errorf("-n %d: want 0 to %d (fib(%d) already makes %d tasks)", cfg.N, maxN, maxN, taskCount(maxN))
	}
	if cfg.Workers < 1 || cfg.Executors < 1 {
		return errors.New("-workers and -executors must be at least 1")
	}
	if cfg.Role != "all" && cfg.Role != "work" && cfg.Role != "submit" {
		return fmt.Errorf("-role %q: want all, work or submit", cfg.Role)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	tg := findTarget(cfg.DatabaseURL)
	if err := tg.ensureDatabase(ctx); err != nil {
		return err
	}

	switch cfg.Role {
	case "submit":
		db, err := openPool(ctx, tg, 2)
		if err != nil {
			return err
		}
		defer db.Close()
		fmt.Fprintf(stdout, "waiting for executors: run `go run ./examples/fibonacci -role work` in other terminals\n")
		return submit(ctx, db, tg, cfg.N, stdout)

	case "work":
		polls, err := work(ctx, tg, cfg, func() {
			fmt.Fprintf(stdout, "working on %s tasks (%s, %d workers each); Ctrl-C to stop\n", fibType, plural(cfg.Executors, "executor"), cfg.Workers)
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "stopped after %d polls\n", sum(polls))
		return nil

	default: // "all"
		db, err := openPool(ctx, tg, 2)
		if err != nil {
			return err
		}
		defer db.Close()
		workCtx, stopWork := context.WithCancel(ctx)
		var (
			polls   []int64
			workErr error
		)
		started, workDone := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(workDone)
			polls, workErr = work(workCtx, tg, cfg, func() { close(started) })
		}()
		select {
		case <-started:
		case <-workDone:
			stopWork()
			return workErr
		}
		err = submit(ctx, db, tg, cfg.N, stdout)
		stopWork()
		<-workDone
		if err == nil && workErr == nil && cfg.Executors > 1 {
			fmt.Fprintf(stdout, "polls by executor: %v\n", polls)
		}
		return errors.Join(err, workErr)
	}
}

// openPool opens a pool of at most maxConns connections on tg, and
// applies the schema migrations (which is idempotent).
func openPool(ctx context.Context, tg target, maxConns int) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(tg.ConnString)
	if err != nil {
		return nil, fmt.Errorf("invalid database URL: %w", err) // pgx's error names it, masked
	}
	pc.MaxConns = int32(maxConns)
	db, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, tg.Wrap("open pool on", err)
	}
	if err := corosql.Migrate(ctx, db); err != nil {
		db.Close()
		return nil, tg.Wrap("migrate", err)
	}
	return db, nil
}

// work runs cfg.Executors executors until ctx ends, calls started once they
// run, and returns how many polls each made.
func work(ctx context.Context, tg target, cfg config, started func()) ([]int64, error) {
	pollers := make([]*fibPoller, cfg.Executors)
	execs := make([]*executor.Executor, cfg.Executors)
	for i := range execs {
		// The polls are short and the executor batches their commits: a
		// few connections suffice.
		db, err := openPool(ctx, tg, min(cfg.Workers, 16)+2)
		if err != nil {
			return nil, err
		}
		defer db.Close()
		execs[i], pollers[i] = newExecutor(db, cfg, cfg.Logger.With("executor", i))
	}
	errs := make([]error, len(execs))
	var wg sync.WaitGroup
	for i, e := range execs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.Run(ctx)
		}()
	}
	started()
	wg.Wait()
	polls := make([]int64, len(pollers))
	for i, p := range pollers {
		polls[i] = p.polls.Load()
	}
	return polls, errors.Join(errs...)
}

// newExecutor returns an executor that polls fibonacci.fib tasks, and its
// poller.
func newExecutor(db *pgxpool.Pool, cfg config, log *slog.Logger) (*executor.Executor, *fibPoller) {
	e := executor.MustNew(db, executor.Config{
		Concurrency: cfg.Workers,
		Logger:      log,
	})
	p := &fibPoller{log: log}
	// fib is deterministic: a poll that failed would fail again, so the task
	// fails at once and its parent is told.
	executor.Register(e, fibType, p, executor.MaxFailures(1))
	return e, p
}

// submit creates the root task for fib(n), waits for it to end, and prints
// its result.
func submit(ctx context.Context, db *pgxpool.Pool, tg target, n int, stdout io.Writer) error {
	root, err := tasks.Create(ctx, db, tasks.Spec{Type: fibType, State: fibState{N: n}})
	if err != nil {
		return fmt.Errorf("create root task: %w", err)
	}
	fmt.Fprintf(stdout, "root task %s computes fib(%d)\n", root, n)
	task, err := tasks.Wait(ctx, db, root)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted; root task %s is left in the database: run again to finish it, or %s", root, tg.Commands("cancel "+root.String()))
		}
		return err
	}
	if task.Status != tasks.StatusDone {
		return fmt.Errorf("root task %s %s: %s", root, task.Status, task.LastError)
	}
	var res fibResult
	if err := json.Unmarshal(task.Result, &res); err != nil {
		return fmt.Errorf("root task %s: result %s: %w", root, task.Result, err)
	}
	elapsed := task.DoneAt.Sub(task.CreatedAt)
	fmt.Fprintf(stdout, "fib(%d) = %d in %s (%d tasks, %.0f tasks/s)\n",
		n, res.Value, elapsed.Round(10*time.Millisecond), res.Tasks, float64(res.Tasks)/elapsed.Seconds())
	return nil
}

// taskCount is how many tasks fib(n) makes: 2·fib(n+1)-1.
func taskCount(n int) int {
	a, b := 0, 1 // fib(0), fib(1)
	for range n {
		a, b = b, a+b
	}
	return 2*b - 1
}

// plural returns "1 executor", "2 executors".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func sum(xs []int64) int64 {
	var s int64
	for _, x := range xs {
		s += x
	}
	return s
}
