package executor_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/inbox"
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

// Messages operators send are bounded with the operator actions: a script
// that sends to a task in a loop (here, a task no executor polls) keeps its
// last 100 operator entries, and the actions among its first 20 attempts.
func TestOperatorSendsInHistoryAreBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	for range 3 {
		require.NoError(t, tasks.ResetFailures(ctx, db, id))
	}
	for i := range 130 {
		require.NoError(t, inbox.SendAsOperator(ctx, db, id, tasks.ID{}, i))
	}
	h := history(t, db, id)
	require.Len(t, h, 103)
	for i, e := range h[:3] {
		require.Equal(t, "reset", e.Action)
		require.Equal(t, i+1, e.Attempt)
	}
	for i, e := range h[3:] {
		require.Equal(t, "send", e.Action)
		require.Equal(t, 3, e.Attempt)
		require.Equal(t, 31+i, e.Seq, "the last 100 sent")
	}
	// A later action counts them among the last 100.
	require.NoError(t, tasks.ResetFailures(ctx, db, id))
	h = history(t, db, id)
	require.Len(t, h, 103)
	require.Equal(t, 32, h[3].Seq)
	require.Equal(t, "reset", h[len(h)-1].Action)
}
