package tasks_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// CreateMany stores the trace context of its ctx with every task it creates,
// and none without one.
func TestCreateStoresTheTraceContext(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	carrier := map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tracestate": "k=v"}
	traced, err := tasks.CreateMany(tasks.WithTrace(ctx, carrier), db, []tasks.Spec{{Type: "a"}, {Type: "b"}})
	require.NoError(t, err)
	plain, err := tasks.Create(ctx, db, tasks.Spec{Type: "c"})
	require.NoError(t, err)
	empty, err := tasks.Create(tasks.WithTrace(ctx, map[string]string{}), db, tasks.Spec{Type: "d"})
	require.NoError(t, err)

	stored := func(id tasks.ID) map[string]string {
		var out map[string]string
		require.NoError(t, db.QueryRow(ctx, `SELECT trace FROM corotask.tasks WHERE task_id = $1`, id).Scan(&out))
		return out
	}
	require.Equal(t, carrier, stored(traced[0]))
	require.Equal(t, carrier, stored(traced[1]))
	require.Nil(t, stored(plain))
	require.Nil(t, stored(empty), "an empty carrier is no trace context")
}

func TestWithTrace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	require.Nil(t, tasks.TraceFrom(ctx))
	require.Equal(t, ctx, tasks.WithTrace(ctx, nil))
	c := map[string]string{"traceparent": "x"}
	require.Equal(t, c, tasks.TraceFrom(tasks.WithTrace(ctx, c)))
}
