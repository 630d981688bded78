package executor_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// Operator actions are kept apart from the polls' cap, but bounded too: a
// script acting on a task in a loop keeps its last 100 actions, and those
// among its first 20 attempts.
func TestOperatorActionsInHistoryAreBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	for range 130 {
		require.NoError(t, tasks.ResetFailures(ctx, db, id))
	}
	h := history(t, db, id)
	want := []int{}
	for a := 1; a <= 130; a++ {
		if a <= 20 || a > 30 {
			want = append(want, a)
		}
	}
	require.Equal(t, want, attempts(h))
}
