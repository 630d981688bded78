package main

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/tasks"
)

func TestLs(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	require.Equal(t, "no tasks\n", c.ok("ls"))
	require.Equal(t, "[]\n", c.ok("ls", "--json"))

	root := c.create("--type", "root", "--state", `{"k": "v"}`)
	sleeping := c.create("--type", "child", "--parent", root.String(), "--in", "2h", "--message", "1")
	running := c.create("--type", "child", "--parent", root.String())
	c.exec(`UPDATE corotask.tasks SET heartbeat = now() - interval '75 seconds', claim = gen_random_uuid(),
		failures = 2, last_error = 'boom' WHERE task_id = $1`, running)
	c.ok("send", running.String(), "1")
	done := c.create("--type", "other")
	c.exec(`UPDATE corotask.tasks SET done_at = now(), outcome = 'done', wake_at = NULL, result = '{"ok": true}'
		WHERE task_id = $1`, done)

	out := c.ok("ls")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 5, out)
	require.Regexp(t, `^ID +TYPE +STATUS +CREATED +UPDATED +WAKE +HEARTBEAT +INBOX +NEXT +FAILURES$`, lines[0])
	// Newest first.
	rows := map[tasks.ID]string{done: lines[1], running: lines[2], sleeping: lines[3], root: lines[4]}
	ago := `(now|[\dms]+ ago)`
	require.Regexp(t, `^`+root.String()+` +root +ready +`+ago+` +`+ago+` +`+ago+` +- +0 +0 +0$`, rows[root])
	require.Regexp(t, `^`+sleeping.String()+` +child +sleeping +`+ago+` +`+ago+` +in (1h59m|2h) +- +1 +0 +0$`, rows[sleeping])
	require.Regexp(t, `^`+running.String()+` +child +running +`+ago+` +`+ago+` +`+ago+` +1m\d+s ago +0 +1 +2$`, rows[running])
	require.Regexp(t, `^`+done.String()+` +other +done +`+ago+` +`+ago+` +- +- +0 +0 +0$`, rows[done])
	// Columns are aligned.
	col := strings.Index(lines[0], "STATUS")
	for _, l := range lines[1:] {
		require.Regexp(t, regexp.MustCompile(`^ [a-z]`), l[col-1:], "aligned: %q", l)
	}

	// Filters.
	requireIDs(t, c.ok("ls", "--type", "child"), running, sleeping)
	requireIDs(t, c.ok("ls", "--status", "running"), running)
	requireIDs(t, c.ok("ls", "--status", "done", "--type", "other"), done)
	requireIDs(t, c.ok("ls", "--parent", root.UUID()), running, sleeping)
	requireIDs(t, c.ok("ls", "--failing"), running)
	requireIDs(t, c.ok("ls", "--after", sleeping.String()), done, running)
	require.Equal(t, "no tasks\n", c.ok("ls", "--status", "failed"))

	// Paging: a note on standard error when the page is full.
	r := c.run("ls", "--limit", "2")
	require.Equal(t, exitOK, r.code, "%s", r)
	requireIDs(t, r.stdout, done, running)
	require.Contains(t, r.stderr, "--before "+running.String())
	r = c.run("ls", "--limit", "2", "--before", running.String())
	require.Equal(t, exitOK, r.code, "%s", r)
	requireIDs(t, r.stdout, sleeping, root)

	// JSON.
	var list []map[string]any
	require.NoError(t, json.Unmarshal([]byte(c.ok("ls", "--json")), &list))
	require.Len(t, list, 4)
	fields := []string{"id", "type", "status", "parent", "wake_at", "heartbeat", "inbox_len", "inbox_next_len",
		"failures", "last_error", "created_at", "done_at", "state", "result", "attempts", "claimed_by", "claimed_at", "updated_at",
		"live_children", "awaiting_children", "key", "priority", "limit_key", "root"}
	slices.Reverse(list) // oldest first, as created
	for _, m := range list {
		require.Len(t, m, len(fields), "%v", m)
		for _, f := range fields {
			require.Contains(t, m, f)
		}
	}
	require.Equal(t, root.String(), list[0]["id"])
	require.Nil(t, list[0]["parent"])
	require.Equal(t, root.String(), list[0]["root"])
	require.Equal(t, map[string]any{"k": "v"}, list[0]["state"])
	require.Nil(t, list[0]["heartbeat"])
	require.Nil(t, list[0]["last_error"])
	require.Equal(t, root.String(), list[2]["parent"])
	require.Equal(t, root.String(), list[2]["root"])
	require.Equal(t, "running", list[2]["status"])
	require.NotNil(t, list[2]["heartbeat"])
	require.Equal(t, "boom", list[2]["last_error"])
	require.EqualValues(t, 2, list[2]["failures"])
	require.EqualValues(t, 1, list[2]["inbox_next_len"])
	require.Equal(t, map[string]any{"ok": true}, list[3]["result"])
	require.NotNil(t, list[3]["done_at"])
	require.Nil(t, list[3]["wake_at"])
}

// requireIDs checks that an ls table lists exactly ids, in order.
func requireIDs(t *testing.T, out string, ids ...tasks.ID) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, len(ids)+1, out)
	for i, id := range ids {
		require.True(t, strings.HasPrefix(lines[i+1], id.String()+" "), "row %d is %s:\n%s", i, id, out)
	}
}

func TestLsErrors(t *testing.T) {
	t.Parallel()
	requireUsage(t, runCLI(t, nil, "", "ls", "--status", "sleepy"), "ls", `invalid status "sleepy"`)
	requireUsage(t, runCLI(t, nil, "", "ls", "--limit", "0"), "ls", `invalid --limit "0"`)
	requireUsage(t, runCLI(t, nil, "", "ls", "--limit", "many"), "ls", `invalid --limit "many"`)
	requireUsage(t, runCLI(t, nil, "", "ls", "--limit", "-3"), "ls", `invalid --limit "-3"`)
}
