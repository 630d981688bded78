package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/tasks"
)

func TestCreate(t *testing.T) {
	t.Parallel()
	c := newCLI(t)

	root := c.create("--type", "orders.checkout", "--state", `{"order": 42}`)
	s := c.show(root)
	require.Equal(t, tasks.Type("orders.checkout"), s.Type)
	require.Equal(t, tasks.StatusReady, s.Status)
	require.True(t, s.Parent.IsZero())
	require.JSONEq(t, `{"order": 42}`, string(s.State))
	require.Zero(t, s.InboxLen)

	// A child with a first message, from its parent, due in an hour.
	before := time.Now()
	child := c.create("--parent", root.String(), "--type", "reminder", "--message", `"hello"`, "--in", "1h")
	s = c.show(child)
	require.Equal(t, root, s.Parent)
	require.Equal(t, tasks.StatusSleeping, s.Status)
	require.WithinDuration(t, before.Add(time.Hour), *s.WakeAt, time.Minute)
	require.JSONEq(t, "null", string(s.State), "no state: the poller's zero value")
	require.Len(t, s.Inbox, 1)
	require.Equal(t, root, s.Inbox[0].From)
	require.JSONEq(t, `"hello"`, string(s.Inbox[0].Body))
	require.Equal(t, 1, c.show(root).Children["sleeping"])

	// --at, and --id given as a UUID: the ID is printed as a ULID.
	id := tasks.NewID()
	at := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	out := c.ok("create", "--type", "t", "--id", id.UUID(), "--at", at.Format(time.RFC3339))
	require.Equal(t, id.String()+"\n", out)
	s = c.show(id)
	require.True(t, at.Equal(*s.WakeAt), "wake_at %v", s.WakeAt)
	require.Equal(t, tasks.StatusSleeping, s.Status)

	// A time in the past makes a ready task.
	s = c.show(c.create("--type", "t", "--at", "2020-01-02T03:04:05+02:00"))
	require.Equal(t, tasks.StatusReady, s.Status)
}

func TestCreateErrors(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	parent := c.create("--type", "p")
	ended := c.create("--type", "p")
	c.ok("cancel", ended.String())
	require.Equal(t, 2, c.count())

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--state", "{}"}, "missing required flag --type"},
		{[]string{"--type", " padded"}, "--type: invalid task type"},
		{[]string{"--type", strings.Repeat("x", tasks.MaxTypeLen+1)}, "--type: invalid task type"},
		{[]string{"--type", "t", "--at", "2030-01-01T00:00:00Z", "--in", "1h"}, "--at and --in exclude each other"},
		{[]string{"--type", "t", "--at", "tomorrow"}, `invalid --at "tomorrow": want an RFC 3339 time`},
		{[]string{"--type", "t", "--in", "soon"}, `invalid --in "soon": want a duration`},
		{[]string{"--type", "t", "--in", "-5m"}, `invalid --in "-5m": must not be negative`},
		{[]string{"--type", "t", "--state", `{"a": 1,}`}, "invalid JSON --state at line 1, column 9: invalid character '}'"},
		{[]string{"--type", "t", "--message", "{\n  \"a\": tru\n}"}, "invalid JSON --message at line 2, column 11: invalid character '\\n' in literal true"},
		{[]string{"--type", "t", "--message", `{"a": 1`}, "invalid JSON --message at line 1, column 8: unexpected end of JSON input"},
		{[]string{"--type", "t", "--state", `{} {}`}, "invalid JSON --state at line 1, column 4: invalid character '{' after top-level value"},
		{[]string{"--type", "t", "--parent", parent.String(), "--message", `nope`}, "invalid JSON --message at line 1, column 2"},
	} {
		requireUsage(t, c.run(append([]string{"create"}, tc.args...)...), "create", tc.want)
	}
	require.Equal(t, 2, c.count(), "nothing was created")

	unknown := tasks.NewID()
	requireError(t, c.run("create", "--type", "t", "--parent", unknown.String()), "create",
		"parent task not found: "+unknown.String())
	requireError(t, c.run("create", "--type", "t", "--parent", ended.String()), "create",
		"parent task has ended: "+ended.String())
	requireError(t, c.run("create", "--type", "t", "--id", parent.String()), "create",
		"task already exists: "+parent.String())
	require.Equal(t, 2, c.count(), "nothing was created")
}
