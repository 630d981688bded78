package sql_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/dberr"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// From SQL too, what a message or a task stores is bounded as a whole: a
// trace context over corotask.max_trace_bytes() is refused (CT413) by
// send_to_task, operator_send and create_tasks, whatever the body's size.
func TestTraceContextIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "t"})
	require.NoError(t, err)
	var limit int
	require.NoError(t, db.QueryRow(ctx, `SELECT corotask.max_trace_bytes()`).Scan(&limit))
	require.Equal(t, tasks.MaxTraceBytes, limit)

	huge := `{"traceparent": "x", "tracestate": "` + strings.Repeat("y", 2<<20) + `"}`
	for _, q := range []string{
		`SELECT corotask.send_to_task($1, NULL, '1', $2::jsonb)`,
		`SELECT corotask.operator_send($1, NULL, '1', $2::jsonb)`,
		`SELECT corotask.create_tasks(ARRAY[gen_random_uuid()], ARRAY['t'], ARRAY[$1::uuid], ARRAY[NULL::jsonb],
			ARRAY['1'::jsonb], ARRAY[NULL::timestamptz], ARRAY[$2::jsonb])`,
	} {
		_, err := db.Exec(ctx, q, id, huge)
		code, msg := pgCode(t, err)
		require.Equal(t, "CT413", code, q)
		require.Contains(t, msg, "trace context of ", q)
		require.ErrorIs(t, dberr.Translate(err), tasks.ErrTooLarge)
		require.ErrorContains(t, dberr.Translate(err), "limit 8192")
	}
	var inbox, children int
	require.NoError(t, db.QueryRow(ctx, `SELECT inbox_len + (SELECT count(*) FROM corotask.messages WHERE task_id = $1), live_children
		FROM corotask.tasks WHERE task_id = $1`, id).
		Scan(&inbox, &children))
	require.Zero(t, inbox)
	require.Zero(t, children)

	_, err = db.Exec(ctx, `SELECT corotask.send_to_task($1, NULL, '1', '{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}')`, id)
	require.NoError(t, err)
}
