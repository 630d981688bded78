package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/tasks"
)

func TestShow(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	root := c.create("--type", "root", "--state", `{"order": 42, "items": ["a"]}`)
	child := c.create("--type", "child", "--parent", root.String(), "--message", `{"go": true}`)
	c.create("--type", "child", "--parent", root.String())
	c.create("--type", "child", "--parent", root.String(), "--in", "1h")
	c.ok("send", root.String(), `{"hello": "world"}`, "--from", child.String())
	c.ok("cancel", child.String())
	// Running, with a message that arrived during the poll; failed twice.
	c.exec(`UPDATE corotask.tasks SET wake_at = now() + interval '1 hour' WHERE task_id = $1`, root)
	require.Equal(t, "retrying "+root.String()+" now\n", c.ok("retry", root.String()))
	holder := tasks.NewID()
	c.exec(`UPDATE corotask.tasks SET heartbeat = now() - interval '3 seconds', claim = gen_random_uuid(),
		claim_expires_at = now() + interval '1 minute', claimed_by = $2, claimed_at = now() - interval '4 seconds',
		failures = 2, last_error = 'boom' WHERE task_id = $1`, root, holder)
	c.ok("send", root.String(), `"late"`)

	out := c.ok("show", root.String())
	for _, re := range []string{
		`(?m)^id +` + root.String() + `$`,
		`(?m)^type +root$`,
		`(?m)^status +running$`,
		`(?m)^parent +-$`,
		`(?m)^created +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \((now|[\dms]+ ago)\)$`,
		`(?m)^heartbeat +\S+ \(\d+s ago\)$`,
		`(?m)^done_at +-$`,
		`(?m)^failures +2$`,
		`(?m)^last_error +boom$`,
		`(?m)^children +1 ready, 1 sleeping, 1 canceled$`,
		// As jsonb stores it: keys by length, then bytes.
		`(?m)^state:\n  \{\n    "items": \[\n      "a"\n    \],\n    "order": 42\n  \}\n`,
		`(?m)^result:\n  -$`,
		`(?m)^inbox: 2 messages\n  1\. +from ` + child.String() + ` +sent (now|\d+s ago) +\{"hello":"world"\}\n  2\. +from ` + child.String() + ` +sent (now|\d+s ago) +done \(canceled\) +null\n`,
		`(?m)^inbox_next: 1 message\n  1\. +from outside +sent (now|\d+s ago) +"late"\n`,
		`(?m)^held_by +` + holder.String() + ` \(not registered\), claimed \d+s ago$`,
		`(?m)^attempts +1$`,
		// The messages sent with send are recorded, numbered after the
		// attempt they came after, or during (the running one).
		`(?m)^history: 3 entries\n  ATTEMPT +OUTCOME +ACTION +BY .*\n  0\.1 +operator +send +\S+ .*\n` +
			`  1 +operator +retry +\S+ +(now|\d+s ago) +- +0 +0 +0 +\d+B +-\n  1\.1 +operator +send +\S+ `,
	} {
		require.Regexp(t, re, out)
	}
	require.NotRegexp(t, `(?m)^root `, out, "a root's root is itself: not shown")
	require.Regexp(t, `(?m)^parent +`+root.String()+`\nroot +`+root.String()+`$`, c.ok("show", child.String()))

	s := c.show(root)
	require.Equal(t, root, s.ID)
	require.Equal(t, tasks.StatusRunning, s.Status)
	require.NotNil(t, s.Heartbeat)
	require.Equal(t, 2, s.InboxLen)
	require.Equal(t, 1, s.InboxNextLen)
	require.Len(t, s.Inbox, 2)
	require.Len(t, s.InboxNext, 1)
	require.True(t, s.InboxNext[0].From.IsZero())
	require.JSONEq(t, `"late"`, string(s.InboxNext[0].Body))
	require.Equal(t, map[string]int{"ready": 1, "paused": 0, "limited": 0, "unserved": 0, "sleeping": 1, "retrying": 0, "suspended": 0,
		"running": 0, "stale": 0, "done": 0, "failed": 0, "canceled": 1}, s.Children)
	require.Equal(t, "boom", *s.LastError)
	require.Equal(t, holder, s.ClaimedBy)
	require.NotNil(t, s.ClaimedAt)
	require.NotNil(t, s.Inbox[0].SentAt)
	require.Len(t, s.History, 3)
	require.Equal(t, tasks.OperatorAction, s.History[0].Outcome)
	require.Equal(t, []int{0, 1, 1}, []int{s.History[0].Attempt, s.History[1].Attempt, s.History[2].Attempt})
	require.Equal(t, []int{1, 0, 1}, []int{s.History[0].Seq, s.History[1].Seq, s.History[2].Seq})

	require.Equal(t, 2, s.LiveChildren, "3 children, 1 canceled")
	require.False(t, s.AwaitingChildren)
	require.NotRegexp(t, `(?m)^awaits`, out)

	// Suspended, awaiting its children.
	c.exec(`UPDATE corotask.tasks SET awaiting_children = true, wake_at = NULL, heartbeat = NULL, claim = NULL,
		claim_expires_at = NULL WHERE task_id = $1`, root)
	out = c.ok("show", root.String())
	require.Regexp(t, `(?m)^status +suspended$`, out)
	require.Regexp(t, `(?m)^awaits +its children \(AwaitChildren\): 2 not ended$`, out)
	require.True(t, c.show(root).AwaitingChildren)

	// An ended task, with its result, shown by its UUID.
	c.exec(`UPDATE corotask.tasks SET done_at = now(), outcome = 'done', wake_at = NULL, result = '{"total": 7}',
		heartbeat = NULL, claim = NULL WHERE task_id = $1`, root)
	out = c.ok("show", root.UUID())
	require.Regexp(t, `(?m)^status +done$`, out)
	require.Regexp(t, `(?m)^wake_at +-$`, out)
	require.Regexp(t, `(?m)^heartbeat +-$`, out)
	require.Regexp(t, `(?m)^done_at +\S+ \((now|[\dms]+ ago)\)$`, out)
	require.Contains(t, out, "result:\n  {\n    \"total\": 7\n  }\n")
	s = c.show(root)
	require.JSONEq(t, `{"total": 7}`, string(s.Result))
	require.NotNil(t, s.DoneAt)

	// A leaf: no children, no messages.
	out = c.ok("show", c.create("--type", "leaf").String())
	require.Regexp(t, `(?m)^children +none$`, out)
	require.True(t, strings.HasSuffix(out, "state:\n  -\nresult:\n  -\ninbox: 0 messages\ninbox_next: 0 messages\nhistory: none\n"), out)
}

func TestShowErrors(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	unknown := tasks.NewID()
	requireError(t, c.run("show", unknown.String()), "show", "task not found: "+unknown.String())
	requireError(t, c.run("show", unknown.String(), "--json"), "show", "task not found: "+unknown.String())
}
