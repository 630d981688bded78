package main

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/termsafe"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// nasty is stored text that would act on a terminal printed raw: an OSC 52
// clipboard write, a title, hidden text, a C1 CSI, a bidi override and
// isolate, a tag character, a carriage return that overwrites the line.
const nasty = "\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b]0;title\x1b\\\x1b[8mhidden\x1b[0m\u009b2J\u202egnp.exe\u2066\U000E0041\rover"

// requireTerminalSafe checks that out is UTF-8 and holds no character a
// terminal acts on but line breaks and tabs.
func requireTerminalSafe(t *testing.T, what, out string) {
	t.Helper()
	require.True(t, utf8.ValidString(out), "%s: %q", what, out)
	for _, r := range out {
		if r != '\n' && r != '\t' {
			require.False(t, termsafe.Dangerous(r), "%s prints %U: %q", what, r, out)
		}
	}
}

// TestStoredTextIsEscaped: whatever the rows hold (text written through SQL,
// a poll's error quoting a remote service, a registered executor's host),
// every command prints no escape sequence nor bidi override; --json output
// decodes to the stored values.
func TestStoredTextIsEscaped(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	root := c.create("--type", "root")
	child := c.create("--type", "child", "--parent", root.String())
	bodyJSON, err := json.Marshal(map[string]string{"k": nasty})
	require.NoError(t, err)
	c.exec(`UPDATE corotask.tasks SET task_type = $2, last_error = $2, failures = 1, inner_state = $3, result = $3
		WHERE task_id IN ($1, $4)`, root, nasty, string(bodyJSON), child)
	pool := testdb.Pool(t, c.url)
	for _, id := range []tasks.ID{root, child} {
		envelope, err := json.Marshal(map[string]any{"body": json.RawMessage(bodyJSON), "err": nasty, "done": true})
		require.NoError(t, err)
		testdb.AppendRaw(t, pool, id, string(envelope))
	}
	executor := tasks.NewID()
	c.exec(`INSERT INTO corotask.executors (executor_id, host, pid, version, task_types, concurrency, expires_at)
		VALUES ($1, $2, 7, $2, ARRAY[$2], 1, now() + interval '1 minute')`, executor, nasty)
	c.exec(`INSERT INTO corotask.history (task_id, attempt, outcome, action, executor_id, error, stack)
		VALUES ($1, 1, 'panicked', $2, $3, $2, $4), ($1, 2, 'operator', $2, NULL, $2, NULL)`,
		root, nasty, executor, "goroutine 1 [running]:\n\t"+nasty+"\n")
	c.exec(`UPDATE corotask.history SET actor = $2 WHERE task_id = $1 AND attempt = 2`, root, nasty)

	for _, args := range [][]string{
		{"show", root.String()},
		{"history", root.String(), "--stack"},
		{"ls"},
		{"ls", "--failing"},
		{"tree", root.String()},
		{"stats"},
		{"executors"},
	} {
		out := c.ok(args...)
		requireTerminalSafe(t, strings.Join(args, " "), out)
		require.Contains(t, out, `\x1b]52;c;`, "%v shows the escaped text\n%s", args, out)
	}
	// The stack keeps its lines, with the rest escaped.
	out := c.ok("history", root.String(), "--stack")
	require.Contains(t, out, "goroutine 1 [running]:\n\t"+termsafe.Text(nasty)+"\n")

	for _, args := range [][]string{
		{"show", root.String(), "--json"},
		{"history", root.String(), "--json"},
		{"ls", "--json"},
		{"stats", "--json"},
		{"executors", "--json"},
	} {
		out := c.ok(args...)
		requireTerminalSafe(t, strings.Join(args, " "), out)
		require.Contains(t, out, `\u001b]52;c;`, "%v", args)
	}
	s := c.show(root)
	require.Equal(t, nasty, string(s.Type))
	require.Equal(t, nasty, *s.LastError)
	var state map[string]string
	require.NoError(t, json.Unmarshal(s.State, &state))
	require.Equal(t, nasty, state["k"])
	require.Equal(t, "goroutine 1 [running]:\n\t"+nasty+"\n", *s.History[0].Stack)
}
