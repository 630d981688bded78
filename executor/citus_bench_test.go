package executor_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// BenchmarkOneshotCitus polls b.N one-shot tasks (each the root of a tree of
// its own, so spread over every shard) with one executor on a Citus cluster
// (COROTASK_CITUS_URL; skipped without it), and BenchmarkOneshotOneServer
// the same on one server, for the ratio in one run:
//
//	go test ./executor -run '^$' -bench 'Oneshot(Citus|OneServer)' -benchtime 2000x
func BenchmarkOneshotCitus(b *testing.B) {
	benchOneshot(b, testdb.Citus(b))
}

func BenchmarkOneshotOneServer(b *testing.B) {
	benchOneshot(b, testdb.New(b))
}

// BenchmarkOneshotCitusMaxRunning is BenchmarkOneshotCitus with a fleet-wide
// maximum on the type that never binds (10,000 running polls), for the
// cost of claiming a type with flow controls on Citus (counted over every
// shard, under the controls lock):
//
//	go test ./executor -run '^$' -bench 'OneshotCitus' -benchtime 2000x
func BenchmarkOneshotCitusMaxRunning(b *testing.B) {
	db := testdb.Citus(b)
	if err := tasks.SetMaxRunning(context.Background(), db, "one", 10000, tasks.AllowNewType()); err != nil {
		b.Fatal(err)
	}
	benchOneshot(b, db)
}

// BenchmarkOneshotCitusKeyLimit is BenchmarkOneshotCitus with the type in
// a key space of one running task per key, each task of its own key (so
// the limit never binds), for the cost of counting the running tasks per
// key over every shard:
//
//	go test ./executor -run '^$' -bench 'OneshotCitus' -benchtime 2000x
func BenchmarkOneshotCitusKeyLimit(b *testing.B) {
	ctx := context.Background()
	db := testdb.Citus(b)
	if err := tasks.SetKeyLimit(ctx, db, "each", 1, []tasks.Type{"one"}, tasks.AllowNewType()); err != nil {
		b.Fatal(err)
	}
	benchOneshot(b, db, func(i int) string { return strconv.Itoa(i) })
}

// committedPolls closes all once n polls have committed.
type committedPolls struct {
	executor.NoHooks
	n   atomic.Int64
	all chan struct{}
}

func (c *committedPolls) CommitDone(_ context.Context, info *executor.CommitInfo) {
	if info.Err == nil && c.n.Add(-int64(info.Polls)) == 0 {
		close(c.all)
	}
}

// benchOneshot creates b.N tasks (the i-th with the limit key limitKey(i),
// when given), then times one executor (Concurrency 64) polling them all,
// until the last commit, and reports tasks/s.
func benchOneshot(b *testing.B, db *pgxpool.Pool, limitKey ...func(i int) string) {
	ctx := context.Background()
	specs := make([]tasks.Spec, b.N)
	for i := range specs {
		specs[i] = tasks.Spec{Type: "one"}
		if len(limitKey) > 0 {
			specs[i].LimitKey = limitKey[0](i)
		}
	}
	if _, err := tasks.CreateMany(ctx, db, specs); err != nil {
		b.Fatal(err)
	}
	hooks := &committedPolls{all: make(chan struct{})}
	hooks.n.Store(int64(b.N))
	cfg := executor.Config{Concurrency: 64, PollInterval: 50 * time.Millisecond, Logger: testdb.Logger(b), Hooks: hooks}
	e := executor.MustNew(db, cfg)
	executor.Register(e, "one", executor.PollerFunc[any, any](doneAtOnce), executor.History(false))
	b.ResetTimer()
	began := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	<-hooks.all
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(began).Seconds(), "tasks/s")
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkTreeCitus runs fib(12) (465 tasks in one tree, so on one shard,
// parents awaiting their children) b.N times with one executor on a Citus
// cluster (COROTASK_CITUS_URL; skipped without it), and reports tasks/s:
//
//	go test ./executor -run '^$' -bench 'TreeCitus' -benchtime 2x
func BenchmarkTreeCitus(b *testing.B) {
	ctx := context.Background()
	db := testdb.Citus(b)
	cfg := executor.Config{Concurrency: 64, PollInterval: 50 * time.Millisecond, Logger: testdb.Logger(b)}
	e := executor.MustNew(db, cfg)
	executor.Register(e, "fib", fibPoller(executor.AwaitChildren(), nil), executor.History(false))
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	b.ResetTimer()
	began := time.Now()
	for range b.N {
		root, err := tasks.Create(ctx, db, tasks.Spec{Type: "fib", State: fibState{N: 12}})
		if err != nil {
			b.Fatal(err)
		}
		// Read on the root's shard alone, every 20 ms.
		tick := time.NewTicker(20 * time.Millisecond)
		for status := ""; status != "done"; <-tick.C {
			if err := db.QueryRow(ctx, `SELECT coalesce(outcome, '') FROM corotask.tasks WHERE task_id = $1 AND root_id = $1`,
				root).Scan(&status); err != nil {
				b.Fatal(err)
			}
			if status != "" && status != "done" {
				b.Fatalf("fib(12) ended %s", status)
			}
		}
		tick.Stop()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*465)/time.Since(began).Seconds(), "tasks/s")
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
