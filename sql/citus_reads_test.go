package sql_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/internal/treeread"
	"github.com/corotask/corotask/tasks"
)

// On a Citus cluster, the reads of the Go API, the CLI and the UI work on
// the distributed tables: a task with its inbox, lists, stats, executors,
// history, flow controls and a tree; and the status an operator action's
// refusal names.
func TestCitusReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Citus(t)

	root, err := tasks.Create(ctx, db, tasks.Spec{Type: "citus.root", State: map[string]int{"n": 1}})
	require.NoError(t, err)
	ids, err := tasks.CreateMany(ctx, db, []tasks.Spec{
		{Type: "citus.child", Parent: root, Message: map[string]string{"hello": "child"}},
		{Type: "citus.child", Parent: root, Priority: 3, LimitKey: "k1"},
	})
	require.NoError(t, err)
	require.NoError(t, inbox.Send(ctx, db, ids[0], tasks.ID{}, map[string]string{"second": "message"}))
	require.NoError(t, tasks.SetMaxRunning(ctx, db, "citus.child", 4))
	require.NoError(t, tasks.SetKeyLimit(ctx, db, "space", 1, []tasks.Type{"citus.child"}))

	got, err := tasks.Get(ctx, db, ids[0])
	require.NoError(t, err, "get")
	require.Equal(t, root, got.Root)
	require.Len(t, got.Inbox, 2)

	list, err := tasks.List(ctx, db, tasks.Filter{Limit: 10})
	require.NoError(t, err, "list")
	require.Len(t, list, 3)
	list, err = tasks.List(ctx, db, tasks.Filter{Type: "citus.child", Status: tasks.StatusReady, Limit: 10})
	require.NoError(t, err, "list ready children")
	require.Len(t, list, 2)

	stats, err := tasks.Stats(ctx, db)
	require.NoError(t, err, "stats")
	require.NotEmpty(t, stats)

	_, err = tasks.Executors(ctx, db)
	require.NoError(t, err, "executors")
	_, err = tasks.History(ctx, db, ids[0], tasks.HistoryOptions{})
	require.NoError(t, err, "history")
	_, _, err = tasks.LastHistory(ctx, db, ids[0], 5)
	require.NoError(t, err, "last history")
	// An operator action refused names the task's status (corotask.status,
	// which reads the controls of its type and key on the coordinator).
	err = tasks.Restart(ctx, db, ids[1])
	require.ErrorIs(t, err, tasks.ErrWrongStatus)
	require.ErrorContains(t, err, "it is ready")

	controls, err := tasks.Controls(ctx, db)
	require.NoError(t, err, "controls")
	require.Len(t, controls.Types, 1)
	require.Equal(t, tasks.Type("citus.child"), controls.Types[0].Type)
	require.Equal(t, 4, controls.Types[0].MaxRunning)
	require.Equal(t, 2, controls.Types[0].Ready)

	// The tree, walked on the root's shard, then read.
	rows, err := treeread.Query(ctx, db, root, 10)
	require.NoError(t, err, "tree")
	depths := map[tasks.ID]int32{}
	var id tasks.ID
	var depth int32
	scans := make([]any, len(rows.FieldDescriptions())) // nil skips a column
	scans[0], scans[len(scans)-1] = &id, &depth
	_, err = pgx.ForEachRow(rows, scans, func() error {
		depths[id] = depth
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, map[tasks.ID]int32{root: 0, ids[0]: 1, ids[1]: 1}, depths)
}

// On Citus, an operator drops a message by its position and digest: the
// inbox moves up, the history keeps it, and a stale digest drops nothing.
func TestCitusDropMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Citus(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "citus.poisoned", Message: "first"})
	require.NoError(t, err)
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, "second"))
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Len(t, task.Inbox, 2)
	digest := tasks.MessageDigest(task.Inbox[0])

	dropped, err := tasks.DropMessage(ctx, db, id, 1, digest)
	require.NoError(t, err)
	require.JSONEq(t, string(task.Inbox[0]), string(dropped))
	_, err = tasks.DropMessage(ctx, db, id, 1, digest)
	require.ErrorIs(t, err, tasks.ErrNoMessage, "position 1 holds the second message now")

	task, err = tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Len(t, task.Inbox, 1)
	var env struct{ Body string }
	require.NoError(t, json.Unmarshal(task.Inbox[0], &env))
	require.Equal(t, "second", env.Body)
	history, err := tasks.History(ctx, db, id, tasks.HistoryOptions{})
	require.NoError(t, err)
	require.Equal(t, "drop_message", history[len(history)-1].Action)
}
