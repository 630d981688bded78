package executor_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

func TestExecutorSurvivesKilledConnections(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	admin := testdb.Pool(t, url)
	e := executor.MustNew(testdb.Pool(t, url), fastConfig(t))
	executor.Register(e, "job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.Done(), nil
	}))
	start(t, e)

	first, err := tasks.Create(ctx, admin, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	waitStatus(t, admin, first, tasks.StatusDone)

	var killed int
	require.NoError(t, admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&killed))
	require.Positive(t, killed)

	var ids []tasks.ID
	for i := 0; i < 5; i++ {
		id, err := tasks.Create(ctx, admin, tasks.Spec{Type: "job"})
		require.NoError(t, err)
		ids = append(ids, id)
	}
	for _, id := range ids {
		waitStatus(t, admin, id, tasks.StatusDone)
	}
}

// Executors that start together on one small pool all start: Run's check
// for a pooler holds two connections at once, and three executors on a
// pool of two each held one and waited for a second.
func TestExecutorsStartTogetherOnASmallPool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	admin := testdb.Pool(t, url)
	pool := testdb.PoolOfSize(t, url, 2)
	for range 3 {
		e := executor.MustNew(pool, fastConfig(t))
		executor.Register(e, "job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
			return executor.Done(), nil
		}))
		start(t, e)
	}
	specs := []tasks.Spec{{Type: "job"}, {Type: "job"}, {Type: "job"}}
	_, err := tasks.CreateMany(ctx, admin, specs)
	require.NoError(t, err)
	waitDone(t, admin, len(specs))
}
