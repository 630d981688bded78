package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/tasks"
)

func TestCancel(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	root := c.create("--type", "root")
	child := c.create("--type", "child", "--parent", root.String())
	c.create("--type", "grandchild", "--parent", child.String())
	other := c.create("--type", "child", "--parent", root.String())

	require.Equal(t, "canceled 2 tasks\n", c.ok("cancel", child.UUID()))
	s := c.show(root)
	require.Equal(t, tasks.StatusReady, s.Status)
	require.Len(t, s.Inbox, 1, "the parent is told")
	require.Equal(t, child, s.Inbox[0].From)
	require.True(t, s.Inbox[0].Done)
	require.Equal(t, "canceled", *s.Inbox[0].Err)
	require.Equal(t, 1, s.Children["canceled"])
	require.Equal(t, 1, s.Children["ready"])

	require.Equal(t, "canceled 2 tasks\n", c.ok("cancel", root.String()))
	require.Equal(t, tasks.StatusCanceled, c.show(other).Status)

	leaf := c.create("--type", "leaf")
	require.Equal(t, "canceled 1 task\n", c.ok("cancel", leaf.String()))
}

func TestCancelErrors(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	unknown := tasks.NewID()
	requireError(t, c.run("cancel", unknown.String()), "cancel", "task not found: "+unknown.String())

	id := c.create("--type", "t")
	c.exec(`UPDATE corotask.tasks SET done_at = now(), outcome = 'done', wake_at = NULL WHERE task_id = $1`, id)
	requireError(t, c.run("cancel", id.String()), "cancel", "task has ended: "+id.String())
	require.Equal(t, tasks.StatusDone, c.show(id).Status)
}
