package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// send --type --key to a task that ends while the send waits for it: the
// key is free then, and the message goes to a new task with the key.
func TestSendByKeyWhileItsTaskEnds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCLI(t)
	old := c.create("--type", "orders.checkout", "--key", "k")
	db := testdb.Pool(t, c.url)
	ending, err := db.Begin(ctx)
	require.NoError(t, err)
	defer ending.Rollback(ctx)
	require.NoError(t, tasks.Cancel(ctx, ending, old))

	sent := make(chan result, 1)
	go func() { sent <- c.run("send", "--type", "orders.checkout", "--key", "k", `"paid"`) }()
	testdb.WaitForLockWait(t, db) // the send waits for the task's row
	require.NoError(t, ending.Commit(ctx))

	r := <-sent
	require.Equal(t, exitOK, r.code, "%s", r)
	task, err := tasks.GetByKey(ctx, db, "orders.checkout", "k")
	require.NoError(t, err)
	require.NotEqual(t, old, task.ID)
	require.Equal(t, "sent message to "+task.ID.String()+" (type orders.checkout, key k)\n", r.stdout)
	require.Equal(t, 1, task.InboxLen)
	require.True(t, strings.Contains(c.ok("show", task.ID.String(), "--json"), `"paid"`))
}
