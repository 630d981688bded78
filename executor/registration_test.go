package executor_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

func findExecutor(t *testing.T, db tasks.DB, id tasks.ID) (tasks.Executor, bool) {
	t.Helper()
	all, err := tasks.Executors(context.Background(), db)
	require.NoError(t, err)
	for _, x := range all {
		if x.ID == id {
			return x, true
		}
	}
	return tasks.Executor{}, false
}

// A running executor has its row: registered when Run starts, refreshed
// while it runs, deleted when it stops. A claim names its executor.
func TestExecutorRegistration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	cfg := fastConfig(t)
	// Refreshed often; alive for hours without one, however slow the machine.
	cfg.HeartbeatTimeout, cfg.HeartbeatInterval = testdb.LongHeartbeat, 300*time.Millisecond
	e := executor.MustNew(db, cfg)
	release := make(chan struct{})
	executor.Register(e, "b.job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		<-release
		return executor.Done(), nil
	}))
	executor.Register(e, "a.job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.Done(), nil
	}))
	stop := start(t, e)
	var first tasks.Executor
	waitFor(t, "the executor's row", func() bool {
		var ok bool
		first, ok = findExecutor(t, db, e.ID())
		return ok
	})
	host, _ := os.Hostname()
	require.Equal(t, host, first.Host)
	require.Equal(t, os.Getpid(), first.PID)
	require.Equal(t, []tasks.Type{"a.job", "b.job"}, first.Types)
	require.Equal(t, 8, first.Concurrency)
	require.NotEmpty(t, first.Version)
	require.False(t, first.Stale)
	require.True(t, first.ExpiresAt.After(first.LastSeen))

	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "b.job"})
	require.NoError(t, err)
	task := waitStatus(t, db, id, tasks.StatusRunning)
	require.Equal(t, e.ID(), task.ClaimedBy)
	require.NotNil(t, task.ClaimedAt)
	waitFor(t, "a refresh", func() bool {
		x, ok := findExecutor(t, db, e.ID())
		return ok && x.LastSeen.After(first.LastSeen) && x.Claims == 1
	})
	close(release)
	waitStatus(t, db, id, tasks.StatusDone)
	stop()
	x, ok := findExecutor(t, db, e.ID())
	require.True(t, ok, "kept, so that histories name it")
	require.NotNil(t, x.StoppedAt, "marked stopped on a graceful stop")
	require.False(t, x.Stale)
	later, err := tasks.Create(ctx, db, tasks.Spec{Type: "a.job"})
	require.NoError(t, err)
	task, err = tasks.Get(ctx, db, later)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusUnserved, task.Status, "no executor serves it any more")
}

// insertExecutor registers an executor the way a running one does, alive
// or long expired.
func insertExecutor(t *testing.T, db *pgxpool.Pool, alive bool, types ...string) tasks.ID {
	t.Helper()
	id := tasks.NewID()
	expires := "now() + interval '1 minute'"
	if !alive {
		expires = "now() - interval '1 minute'"
	}
	_, err := db.Exec(context.Background(), `INSERT INTO corotask.executors (executor_id, host, pid, version, task_types, concurrency, expires_at)
		VALUES ($1, 'elsewhere', 7, 'v0', $2, 1, `+expires+`)`, id, types)
	require.NoError(t, err)
	return id
}

// A ready task is unserved when executors have registered and no live one
// serves its type; an expired executor does not count.
func TestUnservedAndStaleExecutors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	orphan, err := tasks.Create(ctx, db, tasks.Spec{Type: "orphan"})
	require.NoError(t, err)
	served, err := tasks.Create(ctx, db, tasks.Spec{Type: "served"})
	require.NoError(t, err)
	status := func(id tasks.ID) tasks.Status {
		task, err := tasks.Get(ctx, db, id)
		require.NoError(t, err)
		return task.Status
	}
	require.Equal(t, tasks.StatusReady, status(orphan), "no executor has registered: nothing is known")

	dead := insertExecutor(t, db, false, "served", "orphan")
	x, ok := findExecutor(t, db, dead)
	require.True(t, ok)
	require.True(t, x.Stale)
	require.Equal(t, tasks.StatusUnserved, status(orphan), "only a dead executor serves it")

	insertExecutor(t, db, true, "served")
	require.Equal(t, tasks.StatusUnserved, status(orphan))
	require.Equal(t, tasks.StatusReady, status(served))
	unserved, err := tasks.List(ctx, db, tasks.Filter{Status: tasks.StatusUnserved})
	require.NoError(t, err)
	require.Len(t, unserved, 1)
	require.Equal(t, orphan, unserved[0].ID)
}
