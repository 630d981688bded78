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

// Send and SendAsOperator keep the trace context of their ctx in the
// message's envelope, and add no "trace" key without one; SendAsOperator's
// history entry holds the envelope as the inbox does.
func TestSendStoresTheTraceContext(t *testing.T) {
	t.Parallel()
	for name, send := range map[string]func(context.Context, tasks.DB, tasks.ID, tasks.ID, any) error{
		"Send": inbox.Send, "SendAsOperator": inbox.SendAsOperator,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := testdb.Tx(t)
			id, err := tasks.Create(ctx, db, tasks.Spec{Type: "inbox"})
			require.NoError(t, err)
			carrier := map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
			require.NoError(t, send(tasks.WithTrace(ctx, carrier), db, id, tasks.ID{}, "traced"))
			require.NoError(t, send(ctx, db, id, tasks.ID{}, "plain"))

			task, err := tasks.Get(ctx, db, id)
			require.NoError(t, err)
			require.Len(t, task.Inbox, 2)
			var traced, plain map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(task.Inbox[0], &traced))
			require.NoError(t, json.Unmarshal(task.Inbox[1], &plain))
			require.JSONEq(t, `{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`, string(traced["trace"]))
			require.JSONEq(t, `"traced"`, string(traced["body"]))
			require.NotContains(t, plain, "trace")
			require.JSONEq(t, `"plain"`, string(plain["body"]))

			h, err := tasks.History(ctx, db, id, tasks.HistoryOptions{})
			require.NoError(t, err)
			if name == "Send" {
				require.Empty(t, h, "Send records nothing")
				return
			}
			require.Len(t, h, 2)
			require.Equal(t, string(task.Inbox[0]), string(h[0].Message))
			require.Equal(t, string(task.Inbox[1]), string(h[1].Message))
		})
	}
}
