package executor_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// Batches commit one at a time, but a commit that waits (here for a row
// lock an operator's transaction holds) does not hold up the polls that
// finish after it: their batch goes ahead beside it.
func TestWaitingCommitDoesNotHoldUpOthers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	admin := testdb.Pool(t, url)
	const app = "waiting-commit"
	e := executor.MustNew(namedPool(t, url, app), fastConfig(t))
	entered, proceed := make(chan struct{}), make(chan struct{})
	executor.Register(e, "blocked", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		close(entered)
		<-proceed
		return executor.Done(), nil
	}))
	executor.Register(e, "free", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.Done(), nil
	}))
	blocked, err := tasks.Create(ctx, admin, tasks.Spec{Type: "blocked"})
	require.NoError(t, err)
	start(t, e)
	<-entered

	// The blocked task's row is locked once its poll runs, so that its
	// commit waits.
	lock, err := admin.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = lock.Rollback(ctx) }()
	_, err = lock.Exec(ctx, `SELECT 1 FROM corotask.tasks WHERE task_id = $1 FOR UPDATE`, blocked)
	require.NoError(t, err)
	close(proceed)
	waitLockWait(t, admin, app)

	free, err := tasks.Create(ctx, admin, tasks.Spec{Type: "free"})
	require.NoError(t, err)
	waitStatus(t, admin, free, tasks.StatusDone)
	task, err := tasks.Get(ctx, admin, blocked)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusRunning, task.Status, "its commit still waits")

	require.NoError(t, lock.Rollback(ctx))
	waitStatus(t, admin, blocked, tasks.StatusDone)
}
