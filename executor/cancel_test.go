package executor_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

func TestCancelRunningTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	entered := make(chan struct{})
	cause := make(chan error, 1)
	executor.Register(e, "long", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		close(entered)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return executor.Yield(), nil
	}))
	parent, err := tasks.Create(ctx, db, tasks.Spec{Type: "parent", WakeAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "long", Parent: parent})
	require.NoError(t, err)
	start(t, e)
	<-entered
	require.NoError(t, tasks.Cancel(ctx, db, id))
	select {
	case c := <-cause:
		require.ErrorIs(t, c, executor.ErrCanceled)
	case <-time.After(testdb.Patience):
		t.Fatal("the poll of a canceled task was not canceled")
	}
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusCanceled, task.Status)
	p, err := tasks.Get(ctx, db, parent)
	require.NoError(t, err)
	require.Equal(t, 1, p.InboxLen)
}
