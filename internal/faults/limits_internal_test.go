package faults

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// TestExplainListsRunningClaims makes sure that a reading above a limit is
// reported with the claims that ran.
func TestExplainListsRunningClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: TypeNode, LimitKey: "k"})
	require.NoError(t, err)
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET claim = gen_random_uuid(), claimed_by = gen_random_uuid(), claimed_at = now(),
		claim_expires_at = now() + interval '1 hour' WHERE task_id = $1`, id)
	require.NoError(t, err)
	h := &harness{pool: db}
	got := h.explain(ctx, LimitSample{Node: 1, Key: 1, KeyName: "k"})
	require.Contains(t, got, id.UUID())
	require.Contains(t, got, "key=k")
}
