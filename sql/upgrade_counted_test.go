package sql_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	corosql "github.com/corotask/corotask/sql"
	"github.com/corotask/corotask/tasks"
)

// Migration 17 leaves tasks.counted NULL for the tasks written after it,
// and keeps what the rows before it hold (false means not counted, as
// NULL does).
func TestUpgradeLeavesCountedNull(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Pool(t, testdb.EmptyURL(t))
	installMigrations(t, db, 16)

	before, counting, after := tasks.NewID(), tasks.NewID(), tasks.NewID()
	_, err := db.Exec(ctx, `INSERT INTO corotask.tasks (task_id, task_type, root_id) VALUES ($1, 'job', $1)`, before)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `INSERT INTO corotask.tasks (task_id, task_type, root_id, counted) VALUES ($1, 'job', $1, true)`, counting)
	require.NoError(t, err)

	require.NoError(t, corosql.Migrate(ctx, db))
	_, err = db.Exec(ctx, `INSERT INTO corotask.tasks (task_id, task_type, root_id) VALUES ($1, 'job', $1)`, after)
	require.NoError(t, err)

	for id, want := range map[tasks.ID]*bool{before: new(false), counting: new(true), after: nil} {
		var got *bool
		require.NoError(t, db.QueryRow(ctx, `SELECT counted FROM corotask.tasks WHERE task_id = $1`, id).Scan(&got))
		require.Equal(t, want, got, "task %s", id)
	}
}
