package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/tasks"
)

// keyCommands are the commands that act on one task, named by TASK or by
// --type and --key.
var keyCommands = []string{"show", "cancel", "retry", "restart", "history", "tree", "set-state"}

func TestCommandsByKey(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	byKey := []string{"--type", "orders.checkout", "--key", "order 42"}
	order := c.create(append(byKey, "--in", "1h", "--state", `{"step": "charge"}`)...)
	line := c.create("--type", "orders.line", "--parent", order.String())
	other := c.create("--type", "orders.checkout", "--key", "order-43")
	run := func(args ...string) string { return c.ok(append(args, byKey...)...) }

	require.Contains(t, run("show"), order.String())
	require.Equal(t, "retrying "+order.String()+" now\n", run("retry"))
	require.Equal(t, "set state of "+order.String()+"\n  was {\"step\":\"charge\"}\n  now {\"step\":\"ship\"}\n",
		c.ok(append([]string{"set-state"}, append(byKey, `{"step": "ship"}`)...)...))
	require.JSONEq(t, `{"step": "ship"}`, string(c.show(order).State))
	h := run("history")
	require.Regexp(t, `(?m)^\d+ +operator +retry `, h)
	require.Regexp(t, `(?m)^\d+ +operator +set_state `, h)
	var entries []historyJSON
	require.NoError(t, json.Unmarshal([]byte(run("history", "--json")), &entries))
	require.Len(t, entries, 2)
	tree := run("tree")
	require.Contains(t, tree, order.String())
	require.Contains(t, tree, line.String())
	require.NotContains(t, tree, other.String())

	require.Equal(t, "canceled 2 tasks\n", run("cancel"))
	require.Equal(t, tasks.StatusCanceled, c.show(order).Status)
	require.Equal(t, tasks.StatusReady, c.show(other).Status, "another key")
	// The key names no live task now.
	for _, cmd := range []string{"show", "cancel", "retry", "history", "tree"} {
		requireError(t, c.run(append([]string{cmd}, byKey...)...), cmd,
			`task not found: no live task of type "orders.checkout" has key "order 42"`)
	}
	requireError(t, c.run(append([]string{"set-state"}, append(byKey, "1")...)...), "set-state",
		`task not found: no live task of type "orders.checkout" has key "order 42"`)
	requireError(t, c.run("restart", "--type", "orders.checkout", "--key", "order 42"), "restart",
		`task not found: no failed task of type "orders.checkout" has key "order 42"`)
}

// TestRestartByKey: a task that failed no longer holds its key; restart by
// key restarts the last task with the key that failed.
func TestRestartByKey(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	id := c.create("--type", "job", "--key", "nightly")
	c.pollOnce("job", func(ctx context.Context, t *executor.Task[int, json.RawMessage]) (executor.Action, error) {
		return executor.Action{}, errors.New("broken")
	}, executor.MaxFailures(1))
	require.Equal(t, tasks.StatusFailed, c.show(id).Status)
	requireError(t, c.run("retry", "--type", "job", "--key", "nightly"), "retry", `no live task of type "job" has key "nightly"`)

	require.Equal(t, "restarted "+id.String()+": ready now\n", c.ok("restart", "--type", "job", "--key", "nightly"))
	require.Equal(t, tasks.StatusReady, c.show(id).Status)
	require.Equal(t, id, c.show(id).ID)
	// Live again, it is the task with the key.
	require.Equal(t, "canceled 1 task\n", c.ok("cancel", "--type", "job", "--key", "nightly"))
}

func TestTaskRefUsageErrors(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	id := c.create("--type", "t", "--key", "k")
	for _, cmd := range keyCommands {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{nil, "missing TASK argument (or --type and --key)"},
			{[]string{"--type", "t", "--key", "k", id.String()}, "give TASK or --type and --key, not both"},
			{[]string{"--key", "k", id.String()}, "--key needs --type"},
			{[]string{"--key", "k"}, "--key needs --type"},
			{[]string{"--type", "", "--key", "k"}, "--key needs --type"},
			{[]string{"--type", "t"}, "--type goes with --key"},
			{[]string{"--type", "t", id.String()}, "--type goes with --key"},
			{[]string{"--type", "t", "--key", ""}, "--key: invalid task key: empty"},
			{[]string{"not-an-id"}, "invalid task id"},
		} {
			requireUsage(t, c.run(append([]string{cmd}, tc.args...)...), cmd, tc.want)
		}
	}
	requireUsage(t, c.run("set-state", "--type", "t", "--key", "k", "1", "2"), "set-state", `unexpected argument "2"`)
	requireUsage(t, c.run("cancel", "--type", "t", "--key", "k", "x"), "cancel", `unexpected argument "x"`)
	require.Equal(t, tasks.StatusReady, c.show(id).Status, "usage errors change nothing")
}

// drop-message names its task by key too, and its POSITION follows.
func TestDropMessageByKey(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	byKey := []string{"--type", "orders.checkout", "--key", "order-42"}
	order := c.create(append(byKey, "--in", "1h")...)
	c.ok(append([]string{"send"}, append(byKey, `"oops"`)...)...)
	drop := func(args ...string) result {
		return c.run(append(append([]string{"drop-message"}, byKey...), args...)...)
	}

	r := drop("1") // without --digest: prints the message and its digest
	require.Equal(t, exitError, r.code, "%s", r)
	digest := c.show(order).Inbox[0].Digest
	require.Contains(t, r.stdout, "digest "+digest)
	r = drop("1", "--digest", digest)
	require.Equal(t, exitOK, r.code, "%s", r)
	require.True(t, strings.HasPrefix(r.stdout, "dropped message 1 of "+order.String()+": "), r.stdout)
	require.Empty(t, c.show(order).Inbox)
	requireUsage(t, c.run(append([]string{"drop-message"}, byKey...)...), "drop-message", "POSITION")
}
