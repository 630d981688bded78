package tasks_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// A task created without a parent is its own root; a child takes its
// parent's root, whether the parent exists already or is created earlier
// in the same call, at any depth.
func TestCreatedTasksKnowTheirRoot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	rootOf := func(id tasks.ID) tasks.ID {
		t.Helper()
		task, err := tasks.Get(ctx, db, id)
		require.NoError(t, err)
		return task.Root
	}

	a, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	require.Equal(t, a, rootOf(a))
	b, err := tasks.Create(ctx, db, tasks.Spec{Type: "job", Parent: a, Message: "hi"})
	require.NoError(t, err)
	require.Equal(t, a, rootOf(b))

	// One call: a new root with a chain below it, children of b (an
	// existing task below a), and another new root, interleaved.
	r2, c1, c2, c3 := tasks.NewID(), tasks.NewID(), tasks.NewID(), tasks.NewID()
	d1, d2, r3 := tasks.NewID(), tasks.NewID(), tasks.NewID()
	ids, err := tasks.CreateMany(ctx, db, []tasks.Spec{
		{ID: r2, Type: "job"},
		{ID: d1, Type: "job", Parent: b},
		{ID: c1, Type: "job", Parent: r2, Message: 1},
		{ID: r3, Type: "job"},
		{ID: c2, Type: "job", Parent: c1},
		{ID: d2, Type: "job", Parent: d1},
		{ID: c3, Type: "job", Parent: c2, Message: 3},
	})
	require.NoError(t, err)
	require.Len(t, ids, 7)
	for id, want := range map[tasks.ID]tasks.ID{r2: r2, c1: r2, c2: r2, c3: r2, d1: a, d2: a, r3: r3} {
		require.Equal(t, want, rootOf(id), "task %s", id)
	}
	// Keyed tasks take the same path.
	k1, k2 := tasks.NewID(), tasks.NewID()
	_, err = tasks.CreateMany(ctx, db, []tasks.Spec{
		{ID: k1, Type: "job", Key: "k1"},
		{ID: k2, Type: "job", Key: "k2", Parent: k1},
		{Type: "job", Key: "k3", Parent: c3},
	})
	require.NoError(t, err)
	require.Equal(t, k1, rootOf(k1))
	require.Equal(t, k1, rootOf(k2))
	k3, err := tasks.GetByKey(ctx, db, "job", "k3")
	require.NoError(t, err)
	require.Equal(t, r2, k3.Root)

	// A task that inbox.SendToKey creates is a root.
	s, err := inbox.SendToKey(ctx, db, "job", "by-send", "hi", nil)
	require.NoError(t, err)
	require.Equal(t, s, rootOf(s))

	// The message rows carry their task's root.
	var wrong int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM corotask.messages m JOIN corotask.tasks t USING (task_id)
		WHERE m.root_id <> t.root_id`).Scan(&wrong))
	require.Zero(t, wrong)
	var messages int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM corotask.messages`).Scan(&messages))
	require.Equal(t, 4, messages)
}
