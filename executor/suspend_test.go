package executor_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// Suspend with unread messages sleeps until another message arrives (as its
// godoc says); that poll sees the unread messages first.
func TestSuspendWithUnreadMessagesWaitsForTheNextMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, badConfig(t))
	var seen [][]string
	executor.Register(e, "reader", executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
		var batch []string
		// Reads one message per poll, leaving the others.
		if m, ok := t.Inbox.Pop(); ok {
			batch = append(batch, m.Body)
		}
		for i := 0; i < t.Inbox.Len(); i++ {
			batch = append(batch, "unread")
		}
		seen = append(seen, batch)
		return executor.Suspend(), nil
	}))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "reader", Message: "a"})
	require.NoError(t, err)
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, "b"))

	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusSuspended, task.Status, "an unread message does not wake the task")
	require.Equal(t, 1, task.InboxLen)
	n, err = e.PollOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n)

	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, "c"))
	n, err = e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, [][]string{{"a", "unread"}, {"b", "unread"}}, seen, "the next poll sees the unread message first")
}
