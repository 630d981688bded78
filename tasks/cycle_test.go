package tasks_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// A task cannot be its own parent, nor the child of a task that comes later
// in the same CreateMany (two tasks would be each other's ancestors): both
// are refused before the round trip with ErrParentCycle, naming the tasks,
// and nothing is created.
func TestCreateManyRefusesParentCycles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	root, err := tasks.Create(ctx, db, tasks.Spec{Type: "root"})
	require.NoError(t, err)
	a, b := tasks.NewID(), tasks.NewID()

	_, err = tasks.Create(ctx, db, tasks.Spec{ID: a, Type: "t", Parent: a})
	require.ErrorIs(t, err, tasks.ErrParentCycle)
	require.ErrorContains(t, err, "task "+a.String()+" cannot be its own parent")

	_, err = tasks.CreateMany(ctx, db, []tasks.Spec{
		{ID: a, Type: "t", Parent: b},
		{ID: b, Type: "t", Parent: a},
	})
	require.ErrorIs(t, err, tasks.ErrParentCycle)
	require.ErrorContains(t, err, "tasks "+a.String()+" and "+b.String()+" would be each other's parents")

	_, err = tasks.CreateMany(ctx, db, []tasks.Spec{
		{ID: a, Type: "t", Parent: b},
		{ID: b, Type: "t", Parent: root},
	})
	require.ErrorIs(t, err, tasks.ErrParentCycle)
	require.ErrorContains(t, err, "its parent "+b.String()+" comes later in the same CreateMany")

	for _, id := range []tasks.ID{a, b} {
		_, err = tasks.Get(ctx, db, id)
		require.ErrorIs(t, err, tasks.ErrNotFound, "nothing created")
	}
	r, err := tasks.Get(ctx, db, root)
	require.NoError(t, err)
	require.Zero(t, r.LiveChildren)

	// A parent given earlier in the same call is fine.
	ids, err := tasks.CreateMany(ctx, db, []tasks.Spec{
		{ID: b, Type: "t", Parent: root},
		{ID: a, Type: "t", Parent: b},
		{Type: "t", Parent: a},
	})
	require.NoError(t, err)
	require.Equal(t, []tasks.ID{b, a}, ids[:2])
	got, err := tasks.Get(ctx, db, b)
	require.NoError(t, err)
	require.Equal(t, 1, got.LiveChildren)
}
