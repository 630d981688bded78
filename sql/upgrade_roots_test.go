package sql_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	corosql "github.com/corotask/corotask/sql"
	"github.com/corotask/corotask/tasks"
)

// Migration 15 gives every existing task, message and history row the
// root of its task's tree: the topmost ancestor that still exists, or the
// missing parent of a task whose parent was deleted.
func TestUpgradeFindsEachTreesRoot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Pool(t, testdb.EmptyURL(t))
	installMigrations(t, db, 14)

	root, child, grandchild, other := tasks.NewID(), tasks.NewID(), tasks.NewID(), tasks.NewID()
	gone, orphan1, orphan2, orphanChild := tasks.NewID(), tasks.NewID(), tasks.NewID(), tasks.NewID()
	cycle1, cycle2 := tasks.NewID(), tasks.NewID()
	_, err := db.Exec(ctx, `INSERT INTO corotask.tasks (task_id, task_type, parent_id) VALUES
		($1, 'job', NULL), ($2, 'job', $1), ($3, 'job', $2), ($4, 'job', NULL),
		($6, 'job', $5), ($7, 'job', $5), ($8, 'job', $6),
		($9, 'job', $10), ($10, 'job', $9)`,
		root, child, grandchild, other, gone, orphan1, orphan2, orphanChild, cycle1, cycle2)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `INSERT INTO corotask.messages (task_id, seq, envelope) VALUES
		($1, 1, '{}'), ($1, 2, '{}'), ($2, 1, '{}'), ($3, 1, '{}'), ($4, 1, '{}')`,
		grandchild, orphanChild, other, gone)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `INSERT INTO corotask.history (task_id, attempt, outcome) VALUES
		($1, 1, 'committed'), ($2, 1, 'committed'), ($2, 2, 'failed'), ($3, 1, 'committed')`,
		child, orphan2, gone)
	require.NoError(t, err)

	require.NoError(t, corosql.Migrate(ctx, db))

	want := map[tasks.ID]tasks.ID{
		root: root, child: root, grandchild: root, other: other,
		orphan1: gone, orphan2: gone, orphanChild: gone,
		cycle1: cycle1, cycle2: cycle2,
	}
	for _, table := range []string{"tasks", "messages", "history"} {
		rows, err := db.Query(ctx, `SELECT task_id, root_id FROM corotask.`+table)
		require.NoError(t, err)
		n := 0
		for rows.Next() {
			var id, got tasks.ID
			require.NoError(t, rows.Scan(&id, &got))
			if id == gone {
				// Rows of a task that is gone: a root of its own.
				require.Equal(t, gone, got, table)
			} else {
				require.Equal(t, want[id], got, "%s row of task %s", table, id)
			}
			n++
		}
		require.NoError(t, rows.Err())
		require.Equal(t, map[string]int{"tasks": 9, "messages": 5, "history": 4}[table], n, table)
	}
	task, err := tasks.Get(ctx, db, grandchild)
	require.NoError(t, err)
	require.Equal(t, root, task.Root)
}
