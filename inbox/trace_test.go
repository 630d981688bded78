package inbox_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// Send keeps the trace context of its ctx in the message's envelope, and
// adds no "trace" key without one.
func TestSendStoresTheTraceContext(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "inbox"})
	require.NoError(t, err)
	carrier := map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	require.NoError(t, inbox.Send(tasks.WithTrace(ctx, carrier), db, id, tasks.ID{}, "traced"))
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, "plain"))

	var envs [][]byte
	require.NoError(t, db.QueryRow(ctx, `SELECT inbox FROM corotask.tasks WHERE task_id = $1`, id).Scan(&envs))
	require.Len(t, envs, 2)
	var traced, plain map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(envs[0], &traced))
	require.NoError(t, json.Unmarshal(envs[1], &plain))
	require.JSONEq(t, `{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`, string(traced["trace"]))
	require.JSONEq(t, `"traced"`, string(traced["body"]))
	require.NotContains(t, plain, "trace")
	require.JSONEq(t, `"plain"`, string(plain["body"]))
}

// SendAsOperator keeps the trace context as Send does, in the envelope the
// inbox and the history entry hold.
func TestSendAsOperatorStoresTheTraceContext(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "inbox"})
	require.NoError(t, err)
	carrier := map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	require.NoError(t, inbox.SendAsOperator(tasks.WithTrace(ctx, carrier), db, id, tasks.ID{}, "traced"))
	require.NoError(t, inbox.SendAsOperator(ctx, db, id, tasks.ID{}, "plain"))

	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	h, err := tasks.History(ctx, db, id, tasks.HistoryOptions{})
	require.NoError(t, err)
	require.Len(t, h, 2)
	var traced, plain map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(h[0].Message, &traced))
	require.NoError(t, json.Unmarshal(h[1].Message, &plain))
	require.JSONEq(t, `{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`, string(traced["trace"]))
	require.NotContains(t, plain, "trace")
	require.Equal(t, string(task.Inbox[0]), string(h[0].Message))
	require.Equal(t, string(task.Inbox[1]), string(h[1].Message))
}
