package sql_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// commit_polls as executors of the previous functions release call it,
// without the parents of the polled tasks, looks them up: a child that ends
// still tells its parent, which counts it as ended.
func TestCommitPollsWithoutParents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	parent, err := tasks.Create(ctx, db, tasks.Spec{Type: "p"})
	require.NoError(t, err)
	child, err := tasks.Create(ctx, db, tasks.Spec{Type: "c", Parent: parent})
	require.NoError(t, err)
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET wake_at = NULL WHERE task_id = $1`, parent)
	require.NoError(t, err)
	var claim string
	require.NoError(t, db.QueryRow(ctx, `UPDATE corotask.tasks SET claim = gen_random_uuid(), heartbeat = now(),
		claim_expires_at = now() + interval '1 minute', attempts = 1 WHERE task_id = $1 RETURNING claim::text`, child).Scan(&claim))

	var polled tasks.ID
	var superseded bool
	require.NoError(t, db.QueryRow(ctx, `SELECT polled, superseded FROM corotask.commit_polls(
		ARRAY[$1::uuid], ARRAY[$2::uuid], ARRAY['null'::jsonb], ARRAY[0], ARRAY['done'], ARRAY[0::float8],
		ARRAY[NULL::timestamptz], ARRAY['7'::jsonb], ARRAY[NULL::jsonb], ARRAY[1::smallint], 20, 100)`,
		child, claim).Scan(&polled, &superseded))
	require.Equal(t, child, polled)
	require.False(t, superseded)

	p, err := tasks.Get(ctx, db, parent)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusReady, p.Status, "woken by the completion")
	require.Len(t, p.Inbox, 1)
	var m struct {
		From tasks.ID        `json:"from"`
		Body json.RawMessage `json:"body"`
		Done bool            `json:"done"`
	}
	require.NoError(t, json.Unmarshal(p.Inbox[0], &m))
	require.Equal(t, child, m.From)
	require.True(t, m.Done)
	require.JSONEq(t, "7", string(m.Body))
	require.Zero(t, p.LiveChildren)
}
