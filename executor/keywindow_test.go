package executor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// A poll that spawns a child with a key whose task ended within the child
// type's key window fails with ErrExists naming that task, and creates
// nothing.
func TestSpawnKeyedWithinKeyWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	require.NoError(t, tasks.SetKeyWindow(ctx, db, keyedChildren.Type(), time.Hour))
	e := executor.MustNew(db, fastConfig(t))
	executor.Register(e, "windowed.parent", executor.PollerFunc[string, string](func(ctx context.Context, t *executor.Task[string, string]) (executor.Action, error) {
		keyedChildren.SpawnKeyed(t, t.State, keyedChild{}, nil)
		return executor.Suspend(), nil
	}))

	ended, err := keyedChildren.CreateKeyed(ctx, db, "a", keyedChild{})
	require.NoError(t, err)
	require.NoError(t, tasks.Cancel(ctx, db, ended))

	parent, err := tasks.Create(ctx, db, tasks.Spec{Type: "windowed.parent", State: "a"})
	require.NoError(t, err)
	n, err := e.PollOnce(ctx)
	require.Equal(t, 1, n)
	require.ErrorIs(t, err, tasks.ErrExists)
	require.ErrorContains(t, err, ended.String())
	require.ErrorContains(t, err, "key window")
	task, err := tasks.Get(ctx, db, parent)
	require.NoError(t, err)
	require.Equal(t, 1, task.Failures)
	require.Contains(t, task.LastError, ended.String())
	list, err := tasks.List(ctx, db, tasks.Filter{Parent: parent})
	require.NoError(t, err)
	require.Empty(t, list, "the failed poll created no child")

	// Without the window, the same spawn creates the child.
	require.NoError(t, tasks.SetKeyWindow(ctx, db, keyedChildren.Type(), 0))
	require.NoError(t, tasks.Retry(ctx, db, parent))
	n, err = e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	child, err := tasks.GetByKey(ctx, db, keyedChildren.Type(), "a")
	require.NoError(t, err)
	require.Equal(t, parent, child.Parent)
}

// An executor with the grants of before key windows (see
// docs/operations.md) checks its keyed children against them.
func TestSpawnKeyedWithinKeyWindowLeastPrivilege(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	admin := testdb.Pool(t, url)
	worker := "corotask_worker_" + strings.ToLower(tasks.NewID().String()[16:])
	_, err := admin.Exec(ctx, `
		CREATE ROLE `+worker+` NOLOGIN;
		GRANT USAGE ON SCHEMA corotask TO `+worker+`;
		GRANT SELECT, INSERT, UPDATE, DELETE ON corotask.tasks, corotask.messages, corotask.history, corotask.executors TO `+worker+`;
		GRANT UPDATE ON corotask.type_controls, corotask.key_limits, corotask.rate_limits TO `+worker+`;
		GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA corotask TO `+worker+`;`)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP OWNED BY "+worker+"; DROP ROLE "+worker) })
	require.NoError(t, tasks.SetKeyWindow(ctx, admin, keyedChildren.Type(), time.Hour))

	workerDB := poolAs(t, url, worker)
	require.ErrorContains(t, tasks.SetKeyWindow(ctx, workerDB, keyedChildren.Type(), 0), "permission denied")
	e := executor.MustNew(workerDB, fastConfig(t))
	executor.Register(e, "windowed.parent", executor.PollerFunc[string, string](func(ctx context.Context, t *executor.Task[string, string]) (executor.Action, error) {
		keyedChildren.SpawnKeyed(t, t.State, keyedChild{}, nil)
		return executor.Suspend(), nil
	}))
	ended, err := keyedChildren.CreateKeyed(ctx, workerDB, "a", keyedChild{})
	require.NoError(t, err)
	require.NoError(t, tasks.Cancel(ctx, workerDB, ended))
	_, err = tasks.Create(ctx, workerDB, tasks.Spec{Type: "windowed.parent", State: "a"})
	require.NoError(t, err)
	_, err = e.PollOnce(ctx)
	require.ErrorIs(t, err, tasks.ErrExists)
	require.ErrorContains(t, err, ended.String())
}
