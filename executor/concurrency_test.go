package executor_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// runTasks creates n tasks of typ, runs e, and waits until all are done.
// during runs once e has started, before the wait.
func runTasks(t *testing.T, db *pgxpool.Pool, e *executor.Executor, typ tasks.Type, n int, during func()) {
	t.Helper()
	ctx := context.Background()
	specs := make([]tasks.Spec, n)
	for i := range specs {
		specs[i] = tasks.Spec{Type: typ}
	}
	_, err := tasks.CreateMany(ctx, db, specs)
	require.NoError(t, err)
	start(t, e)
	during()
	waitFor(t, "all done", func() bool {
		list, err := tasks.List(ctx, db, tasks.Filter{Status: tasks.StatusDone, Limit: n + 1})
		require.NoError(t, err)
		return len(list) == n
	})
}

func TestConcurrencyLimitPerType(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	var g gauge
	executor.Register(e, "limited", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		defer g.enter()()
		return executor.Done(), nil
	}), executor.MaxConcurrency(2))
	runTasks(t, db, e, "limited", 30, func() {})
	require.LessOrEqual(t, g.peak.Load(), int64(2))
}

// TestConcurrencyLimit: no more than Config.Concurrency polls run at once,
// although the executor claims more while finished polls commit.
func TestConcurrencyLimit(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	cfg := fastConfig(t)
	cfg.Concurrency = 3
	e := executor.MustNew(db, cfg)
	var g gauge
	gate := make(chan struct{})
	executor.Register(e, "gated", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		defer g.enter()()
		<-gate
		return executor.Done(), nil
	}))
	runTasks(t, db, e, "gated", 30, func() {
		waitFor(t, "every slot busy", func() bool { return g.cur.Load() == 3 })
		close(gate)
	})
	require.Equal(t, int64(3), g.peak.Load())
}

// TestCommittingPollFreesItsSlot: a poll that returned no longer holds its
// slot while its outcome commits, so a slow commit does not stall the
// executor.
func TestCommittingPollFreesItsSlot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	cfg := fastConfig(t)
	cfg.Concurrency = 1
	e := executor.MustNew(db, cfg)
	polling, locked := make(chan struct{}), make(chan struct{})
	executor.Register(e, "slow", executor.PollerFunc[int, int](func(context.Context, *executor.Task[int, int]) (executor.Action, error) {
		close(polling)
		<-locked
		return executor.Done(), nil
	}))
	executor.Register(e, "quick", executor.PollerFunc[int, int](func(context.Context, *executor.Task[int, int]) (executor.Action, error) {
		return executor.Done(), nil
	}))
	slow, err := tasks.Create(ctx, db, tasks.Spec{Type: "slow"})
	require.NoError(t, err)
	start(t, e)
	<-polling
	// Hold the slow task's row lock, so that its commit waits.
	tx, err := db.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	_, err = tx.Exec(ctx, "SELECT 1 FROM corotask.tasks WHERE task_id = $1 FOR UPDATE", slow)
	require.NoError(t, err)
	quick, err := tasks.Create(ctx, db, tasks.Spec{Type: "quick"})
	require.NoError(t, err)
	close(locked)
	waitStatus(t, db, quick, tasks.StatusDone)
	task, err := tasks.Get(ctx, db, slow)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusRunning, task.Status, "the slow task's commit waits on the lock")
	require.NoError(t, tx.Rollback(ctx))
	waitStatus(t, db, slow, tasks.StatusDone)
}
