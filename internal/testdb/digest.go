package testdb

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/tasks"
)

// InboxDigest returns the MessageDigest of the message at position (1: the
// oldest) of the task's inbox, as an operator reads it before dropping it.
func InboxDigest(t testing.TB, db tasks.DB, id tasks.ID, position int) string {
	t.Helper()
	task, err := tasks.Get(context.Background(), db, id)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(task.Inbox), position, "task %s has no message at position %d", id, position)
	return tasks.MessageDigest(task.Inbox[position-1])
}
