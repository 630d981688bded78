package inbox_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// The whole envelope is bounded, not only the body: a trace context larger
// than tasks.MaxTraceBytes is refused with ErrTooLarge, naming the trace
// context, and nothing is delivered (a 1-byte body once stored 2 MB of
// trace context with it); one within the limit is stored.
func TestSendRefusesALargeTraceContext(t *testing.T) {
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
			huge := map[string]string{
				"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
				"tracestate":  strings.Repeat("k=v,", 2<<20/4),
			}
			err = send(tasks.WithTrace(ctx, huge), db, id, tasks.ID{}, 1)
			require.ErrorIs(t, err, tasks.ErrTooLarge)
			require.ErrorContains(t, err, "trace context of ")
			require.ErrorContains(t, err, "limit 8192")

			fits := map[string]string{
				"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
				"tracestate":  strings.Repeat("k=v,", (tasks.MaxTraceBytes-200)/4),
			}
			require.NoError(t, send(tasks.WithTrace(ctx, fits), db, id, tasks.ID{}, 2))
			task, err := tasks.Get(ctx, db, id)
			require.NoError(t, err)
			require.Len(t, task.Inbox, 1, "only the message within the limits")
		})
	}
}

// A body over the limit is still refused as before, and named as the
// message's size.
func TestSendRefusesALargeBody(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "inbox"})
	require.NoError(t, err)
	err = inbox.Send(ctx, db, id, tasks.ID{}, strings.Repeat("x", tasks.MaxMessageBytes+1))
	require.ErrorIs(t, err, tasks.ErrTooLarge)
	require.ErrorContains(t, err, " bytes, limit 1048576")
	require.NotContains(t, err.Error(), "trace")
}
