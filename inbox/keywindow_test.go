package inbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/corotasktest"
	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/tasks"
)

// Within its type's key window, a send to a key whose task ended is refused
// with ErrEnded naming that task, and creates nothing; after it, the send
// creates a new task.
func TestSendToKeyWithinKeyWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := corotasktest.NewClock()
	db := corotasktest.NewDB(t, corotasktest.WithClock(clock))
	require.NoError(t, tasks.SetKeyWindow(ctx, db, "order", time.Hour))

	first, err := inbox.SendToKey(ctx, db, "order", "order-42", "hello", nil)
	require.NoError(t, err)
	again, err := inbox.SendToKey(ctx, db, "order", "order-42", "again", nil)
	require.NoError(t, err)
	require.Equal(t, first, again, "a live task takes the message")
	require.NoError(t, tasks.Cancel(ctx, db, first))

	clock.Advance(30 * time.Minute)
	_, err = inbox.SendToKey(ctx, db, "order", "order-42", "late", nil)
	require.ErrorIs(t, err, tasks.ErrEnded)
	require.ErrorContains(t, err, first.String())
	require.ErrorContains(t, err, "key window of 01:00:00")
	_, err = tasks.GetByKey(ctx, db, "order", "order-42")
	require.ErrorIs(t, err, tasks.ErrNotFound, "the refused send created nothing")

	// Another type with the key is not concerned.
	_, err = inbox.SendToKey(ctx, db, "invoice", "order-42", "hello", nil)
	require.NoError(t, err)

	clock.Advance(30 * time.Minute)
	second, err := inbox.SendToKey(ctx, db, "order", "order-42", "later", nil)
	require.NoError(t, err)
	require.NotEqual(t, first, second)
}
