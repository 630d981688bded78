package tasks_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// LastHistory returns the end of a history and says whether earlier
// entries are kept.
func TestLastHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "w"})
	require.NoError(t, err)
	for range 3 {
		require.NoError(t, inbox.SendAsOperator(ctx, db, id, tasks.ID{}, 1))
	}
	h, more, err := tasks.LastHistory(ctx, db, id, 2)
	require.NoError(t, err)
	require.True(t, more)
	require.Equal(t, []string{"0.2", "0.3"}, []string{h[0].Number(), h[1].Number()})
	h, more, err = tasks.LastHistory(ctx, db, id, 3)
	require.NoError(t, err)
	require.False(t, more)
	require.Len(t, h, 3)
	_, _, err = tasks.LastHistory(ctx, db, id, 0)
	require.ErrorContains(t, err, "must be positive")
	_, _, err = tasks.LastHistory(ctx, db, tasks.NewID(), 2)
	require.ErrorIs(t, err, tasks.ErrNotFound)
}
