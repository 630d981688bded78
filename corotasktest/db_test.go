package corotasktest_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/corotasktest"
	"github.com/corotask/corotask/tasks"
)

// Each test's database has corotask's schema, and none of another test's
// tasks.
func TestNewDBIsMigratedAndIsolated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := corotasktest.NewDB(t), corotasktest.NewDB(t)
	id, err := tasks.Create(ctx, a, tasks.Spec{Type: "test.task"})
	require.NoError(t, err)
	_, err = tasks.Get(ctx, b, id)
	require.ErrorIs(t, err, tasks.ErrNotFound)
	listed, err := tasks.List(ctx, a, tasks.Filter{})
	require.NoError(t, err)
	require.Len(t, listed, 1)

	// The URL, for a program that connects by itself.
	other, err := pgxpool.New(ctx, a.Config().ConnString())
	require.NoError(t, err)
	defer other.Close()
	_, err = tasks.Get(ctx, other, id)
	require.NoError(t, err)
}

// The database is dropped once its test has ended.
func TestNewDBIsDropped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var name string
	t.Run("user", func(t *testing.T) {
		db := corotasktest.NewDB(t)
		require.NoError(t, db.QueryRow(ctx, `SELECT current_database()`).Scan(&name))
	})
	// Main drops it in the background: wait for it to go.
	look := corotasktest.NewDB(t)
	require.Eventually(t, func() bool {
		var exists bool
		require.NoError(t, look.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists))
		return !exists
	}, 3*time.Minute, 10*time.Millisecond)
}

// Tx's writes are the test's own, rolled back when it ends.
func TestTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := corotasktest.Tx(t)
	id, err := tasks.Create(ctx, tx, tasks.Spec{Type: "test.task"})
	require.NoError(t, err)
	_, err = tasks.Create(ctx, tx, tasks.Spec{ID: id, Type: "test.task"})
	require.ErrorIs(t, err, tasks.ErrExists)
	task, err := tasks.Get(ctx, tx, id)
	require.NoError(t, err, "the failed statement did not abort the transaction")
	require.Equal(t, tasks.StatusReady, task.Status)
}
