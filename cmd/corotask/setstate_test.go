package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/tasks"
)

func TestSetState(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	id := c.create("--type", "t", "--state", `{"step": 3}`, "--in", "1h")
	before := c.show(id)

	require.Equal(t, "set state of "+id.String()+"\n  was {\"step\":3}\n  now {\"to\":\"b\",\"step\":4}\n",
		c.ok("set-state", id.String(), `{"step": 4, "to": "b"}`))
	s := c.show(id)
	require.JSONEq(t, `{"step": 4, "to": "b"}`, string(s.State))
	require.Equal(t, tasks.StatusSleeping, s.Status, "when it is polled is unchanged")

	// From standard input, with "-" or no argument, and from a file.
	r := c.runIn("[1,\n 2]\n", "set-state", id.String(), "-")
	require.Equal(t, exitOK, r.code, "%s", r)
	require.Equal(t, "set state of "+id.String()+"\n  was {\"to\":\"b\",\"step\":4}\n  now [1,2]\n", r.stdout)
	r = c.runIn(`"text"`, "set-state", id.String())
	require.Equal(t, exitOK, r.code, "%s", r)
	require.JSONEq(t, `"text"`, string(c.show(id).State))
	file := filepath.Join(t.TempDir(), "state.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"from": "file"}`), 0o600))
	require.Contains(t, c.ok("set-state", "--file", file, id.String()), `now {"from":"file"}`)
	require.Equal(t, "set state of "+id.String()+"\n  was {\"from\":\"file\"}\n  now {\"from\":\"file\"}\n(the same state)\n",
		c.ok("set-state", id.String(), `{"from": "file"}`))

	// A task created without a state had none; JSON null is a state.
	bare := c.create("--type", "t")
	require.Equal(t, "set state of "+bare.String()+"\n  was null (none: the poller's zero value)\n  now null\n",
		c.ok("set-state", bare.String(), "null"))

	// The history shows the action, and --json both states.
	out := c.ok("history", id.String())
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 6, out)
	require.Regexp(t, `^`+strconv.Itoa(before.Attempts+1)+` +operator +set_state +\S+ `, lines[1])
	var h []historyJSON
	require.NoError(t, json.Unmarshal([]byte(c.ok("history", id.String(), "--json")), &h))
	require.Len(t, h, 5)
	require.Equal(t, "set_state", *h[0].Action)
	require.JSONEq(t, `{"step": 3}`, string(h[0].StateBefore))
	require.JSONEq(t, `{"step": 4, "to": "b"}`, string(h[0].State))
	require.JSONEq(t, `[1, 2]`, string(h[2].StateBefore))
	require.JSONEq(t, `"text"`, string(h[2].State))
}

func TestSetStateErrors(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	id := c.create("--type", "t", "--state", `{"step": 3}`)
	file := filepath.Join(t.TempDir(), "state.json")
	require.NoError(t, os.WriteFile(file, []byte("{\n  \"a\": 1,\n}"), 0o600))

	for _, tc := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"", []string{id.String(), `{"step": }`}, "invalid JSON state at line 1, column 10: invalid character '}' looking for beginning of value"},
		{"", []string{id.String()}, "invalid JSON state: empty"},
		{"[1, 2", []string{id.String(), "-"}, "invalid JSON state at line 1, column 6: unexpected end of JSON input"},
		{"", []string{"--file", file, id.String()}, "invalid JSON state at line 3, column 1: invalid character '}' looking for beginning of object key string"},
		{"", []string{"--file", filepath.Join(t.TempDir(), "missing.json"), id.String()}, "--file: open "},
		{"", []string{"--file", file, id.String(), "1"}, "give the state as the JSON argument or with --file, not both"},
		{"", []string{"--file", file, id.String(), "-"}, "give the state as the JSON argument or with --file, not both"},
		{"", []string{}, "missing TASK argument"},
		{"", []string{"nope", "1"}, "invalid task id"},
		{"", []string{id.String(), "1", "2"}, `unexpected argument "2"`},
	} {
		requireUsage(t, c.runIn(tc.stdin, append([]string{"set-state"}, tc.args...)...), "set-state", tc.want)
	}
	require.JSONEq(t, `{"step": 3}`, string(c.show(id).State), "nothing was set")

	unknown := tasks.NewID()
	requireError(t, c.run("set-state", unknown.String(), "1"), "set-state", "task not found: "+unknown.String())
	c.exec(`UPDATE corotask.tasks SET claim = gen_random_uuid(), heartbeat = now(),
		claim_expires_at = now() + interval '1 hour', claimed_at = now() WHERE task_id = $1`, id)
	requireError(t, c.run("set-state", id.String(), "1"), "set-state",
		"task is running: "+id.String()+": an executor holds it: try again once its poll has ended")
	ended := c.create("--type", "t")
	c.ok("cancel", ended.String())
	requireError(t, c.run("set-state", ended.String(), "1"), "set-state", "task has ended: "+ended.String())
	require.JSONEq(t, `{"step": 3}`, string(c.show(id).State), "nothing was set")
}
