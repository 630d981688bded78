package executor_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

func TestRetentionDeletesExpiredTasks(t *testing.T) {
	t.Parallel()
	checkRetentionDeletesExpired(t, testdb.New(t))
}

// checkRetentionDeletesExpired checks on db that DeleteExpired deletes the
// task that ended before the retention period, with its history, and keeps
// the one that ended within it and the live one.
func checkRetentionDeletesExpired(t *testing.T, db *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	cfg := fastConfig(t)
	cfg.Retention = time.Hour
	e := executor.MustNew(db, cfg)
	old, err := tasks.Create(ctx, db, tasks.Spec{Type: "a"})
	require.NoError(t, err)
	recent, err := tasks.Create(ctx, db, tasks.Spec{Type: "a"})
	require.NoError(t, err)
	alive, err := tasks.Create(ctx, db, tasks.Spec{Type: "a"})
	require.NoError(t, err)
	require.NoError(t, tasks.Cancel(ctx, db, old))
	require.NoError(t, tasks.Cancel(ctx, db, recent))
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET done_at = now() - interval '2 hours' WHERE task_id = $1`, old)
	require.NoError(t, err)
	n, err := e.DeleteExpired(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = tasks.Get(ctx, db, old)
	require.ErrorIs(t, err, tasks.ErrNotFound)
	for _, id := range []tasks.ID{recent, alive} {
		_, err = tasks.Get(ctx, db, id)
		require.NoError(t, err)
	}
	var history int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM corotask.history WHERE task_id = $1`, old).Scan(&history))
	require.Zero(t, history)
}

// Retention keeps an ended task's record while it has children, so that a
// cancel reaches every live descendant.
func TestRetentionKeepsParentsOfLiveTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	root, err := tasks.Create(ctx, db, tasks.Spec{Type: "root"})
	require.NoError(t, err)
	child, err := tasks.Create(ctx, db, tasks.Spec{Type: "child", Parent: root})
	require.NoError(t, err)
	grandchild, err := tasks.Create(ctx, db, tasks.Spec{Type: "grandchild", Parent: child})
	require.NoError(t, err)
	// The child ended long ago; the grandchild lives on.
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET done_at = now() - interval '1 day', outcome = 'done', wake_at = NULL
		WHERE task_id = $1`, child)
	require.NoError(t, err)

	cfg := fastConfig(t)
	cfg.Retention = time.Hour
	e := executor.MustNew(db, cfg)
	n, err := e.DeleteExpired(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	_, err = tasks.Get(ctx, db, child)
	require.NoError(t, err)

	require.NoError(t, tasks.Cancel(ctx, db, root))
	g, err := tasks.Get(ctx, db, grandchild)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusCanceled, g.Status)

	// Once its descendants have ended and expired, the leaves go first, then
	// their parents, in one call.
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET done_at = now() - interval '1 day'`)
	require.NoError(t, err)
	n, err = e.DeleteExpired(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n)
}

// Retention deletes a task's history with it.
func TestRetentionDeletesHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	cfg := fastConfig(t)
	cfg.Retention = time.Hour
	e := executor.MustNew(db, cfg)
	executor.Register(e, "job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.Done(), nil
	}))
	old, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	kept, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	_, err = e.PollOnce(ctx)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET done_at = now() - interval '2 hours' WHERE task_id = $1`, old)
	require.NoError(t, err)
	n, err := e.DeleteExpired(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	var left int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM corotask.history WHERE task_id = $1`, old).Scan(&left))
	require.Zero(t, left)
	require.Len(t, history(t, db, kept), 1)
}

// With the server's autovacuum off, the executor vacuums the history too:
// retention and the cap delete its rows all the time.
func TestVacuumIfNeededVacuumsHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	var autovacuum string
	require.NoError(t, db.QueryRow(ctx, "SHOW autovacuum").Scan(&autovacuum))
	_, err := db.Exec(ctx, `INSERT INTO corotask.history (task_id, attempt, outcome)
		SELECT gen_random_uuid(), 1, 'committed' FROM generate_series(1, 3000)`)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `DELETE FROM corotask.history`)
	require.NoError(t, err)
	dead := func() int {
		var n int
		_, _ = db.Exec(ctx, "SELECT pg_stat_force_next_flush()")
		require.NoError(t, db.QueryRow(ctx, "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'corotask.history'::regclass").Scan(&n))
		return n
	}
	waitFor(t, "the dead rows in the statistics", func() bool { return dead() >= 3000 })
	done, err := e.VacuumIfNeeded(ctx)
	require.NoError(t, err)
	require.Equal(t, autovacuum == "off", done, "vacuums only when autovacuum is off")
	if done {
		waitFor(t, "the vacuum in the statistics", func() bool { return dead() < 1000 })
	}
}
