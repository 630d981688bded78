package main

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

func TestSend(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	to := c.create("--type", "t", "--in", "1h")
	from := c.create("--type", "sender")

	require.Equal(t, "sent message to "+to.String()+"\n", c.ok("send", to.String(), `{"n": 1}`))
	// From standard input, with "-" or no argument; flags anywhere; the
	// recipient given as a UUID.
	r := c.runIn(`{"n": 2}`, "send", to.UUID(), "-", "--from", from.String())
	require.Equal(t, exitOK, r.code, "%s", r)
	require.Equal(t, "sent message to "+to.String()+" from "+from.String()+"\n", r.stdout)
	r = c.runIn("\"three\"\n", "send", "--from", from.String(), to.String())
	require.Equal(t, exitOK, r.code, "%s", r)

	s := c.show(to)
	require.Equal(t, tasks.StatusReady, s.Status, "a message wakes a sleeping task")
	require.Len(t, s.Inbox, 3)
	require.True(t, s.Inbox[0].From.IsZero())
	require.JSONEq(t, `{"n": 1}`, string(s.Inbox[0].Body))
	require.Equal(t, from, s.Inbox[1].From)
	require.JSONEq(t, `{"n": 2}`, string(s.Inbox[1].Body))
	require.JSONEq(t, `"three"`, string(s.Inbox[2].Body))
	require.False(t, s.Inbox[2].Done)
	require.Nil(t, s.Inbox[2].Err)

	// A negative number needs "--" so that it is not read as a flag.
	c.ok("send", to.String(), "--from", from.String(), "--", "-4")
	require.JSONEq(t, `-4`, string(c.show(to).Inbox[3].Body))
}

func TestSendErrors(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	to := c.create("--type", "t")
	ended := c.create("--type", "t")
	c.ok("cancel", ended.String())

	for _, tc := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"", []string{to.String(), `{"a": }`}, "invalid JSON message at line 1, column 7: invalid character '}' looking for beginning of value"},
		{"{\n  \"a\": 1\n  \"b\": 2\n}", []string{to.String()}, "invalid JSON message at line 3, column 3: invalid character '\"' after object key:value pair"},
		{"[1, 2", []string{to.String(), "-"}, "invalid JSON message at line 1, column 6: unexpected end of JSON input"},
		{"", []string{to.String()}, "invalid JSON message: empty"},
		{" \n", []string{to.String(), "-"}, "invalid JSON message: empty"},
		{"", []string{to.String(), "héllo"}, "invalid JSON message at line 1, column 1: invalid character 'h'"},
		{"", []string{to.String(), `"é" x`}, "invalid JSON message at line 1, column 5: invalid character 'x' after top-level value"},
	} {
		r := c.runIn(tc.stdin, append([]string{"send"}, tc.args...)...)
		requireUsage(t, r, "send", tc.want)
	}
	require.Zero(t, c.show(to).InboxLen, "nothing was sent")

	unknown := tasks.NewID()
	requireError(t, c.run("send", unknown.String(), "1"), "send", "task not found: "+unknown.String())
	requireError(t, c.run("send", ended.String(), "1"), "send", "task has ended: "+ended.String())
	requireError(t, c.run("send", to.String(), "1", "--from", unknown.String()), "send", "--from task not found: "+unknown.String())
	big := `"` + strings.Repeat("x", tasks.MaxMessageBytes+10) + `"`
	requireError(t, c.run("send", to.String(), big), "send", "message too large")
	require.Zero(t, c.show(to).InboxLen, "nothing was sent")
}

// A message sent with send is recorded in the task's history, numbered after
// the attempt it came after; a refused one is not.
func TestSendIsRecorded(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	to := c.create("--type", "t", "--in", "1h")
	from := c.create("--type", "sender")
	ended := c.create("--type", "t")
	c.ok("cancel", ended.String())

	c.ok("send", to.String(), `{"n": 1}`)
	c.ok("send", "--from", from.String(), to.String(), `"two"`)
	requireError(t, c.run("send", ended.String(), "1"), "send", "task has ended")
	requireError(t, c.run("send", to.String(), "1", "--from", tasks.NewID().String()), "send", "--from task not found")

	out := c.ok("history", to.String())
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 3, out)
	require.Regexp(t, `^0\.1 +operator +send +\S+ +(now|\ds ago) +- +0 +0 +0 +\d+B +-$`, lines[1])
	require.Regexp(t, `^0\.2 +operator +send +\S+ +(now|\ds ago) +- +0 +0 +0 +\d+B +-$`, lines[2])

	var h []struct {
		Attempt int
		Seq     int
		Outcome string
		Action  string
		Actor   string
		Message struct {
			From *string
			Body json.RawMessage
		}
	}
	require.NoError(t, json.Unmarshal([]byte(c.ok("history", to.String(), "--json")), &h))
	require.Len(t, h, 2)
	for i, e := range h {
		require.Zero(t, e.Attempt)
		require.Equal(t, i+1, e.Seq)
		require.Equal(t, "operator", e.Outcome)
		require.Equal(t, "send", e.Action)
		require.NotEmpty(t, e.Actor)
	}
	require.Nil(t, h[0].Message.From)
	require.JSONEq(t, `{"n": 1}`, string(h[0].Message.Body))
	require.Equal(t, from.UUID(), *h[1].Message.From)
	require.JSONEq(t, `"two"`, string(h[1].Message.Body))

	require.Len(t, c.show(ended).History, 1, "the cancel alone")
	require.Regexp(t, `(?m)^history: 2 entries\n  ATTEMPT .*\n  0\.1 +operator +send `, c.ok("show", to.String()))

	// show prints the last 5 entries, and says when there are more.
	for i := range 4 {
		c.ok("send", to.String(), strconv.Itoa(i))
	}
	require.Regexp(t, `(?m)^history: the last 5 entries \('corotask history `+to.String()+`' for all kept\)\n  ATTEMPT .*\n  0\.2 +operator +send `,
		c.ok("show", to.String()))
	require.Len(t, c.show(to).History, 5)
}

// A role that may send with send_to_task but not call operator_send (a
// grant made before schema 7 does not cover it) is told what to grant, and
// nothing is sent.
func TestSendWithoutTheOperatorSendGrant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCLI(t)
	to := c.create("--type", "t", "--in", "1h")
	admin := testdb.Pool(t, c.url)
	role := "cli_sender_" + strings.ToLower(tasks.NewID().String()[20:])
	for _, stmt := range []string{
		"CREATE ROLE " + role + " LOGIN",
		"GRANT USAGE ON SCHEMA corotask TO " + role,
		"GRANT EXECUTE ON FUNCTION corotask.send_to_task(uuid, uuid, jsonb), corotask.send_to_task(uuid, uuid, jsonb, jsonb) TO " + role,
		"GRANT SELECT ON corotask.tasks TO " + role,
	} {
		_, err := admin.Exec(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP OWNED BY "+role)
		_, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+role)
	})
	u, err := url.Parse(c.url)
	require.NoError(t, err)
	u.User = url.User(role)
	r := runCLI(t, nil, "", "send", "--database-url", u.String(), to.String(), "1")
	requireError(t, r, "send", "permission denied for function operator_send")
	require.Contains(t, r.stderr, "GRANT EXECUTE ON FUNCTION corotask.operator_send(uuid, uuid, jsonb, jsonb)")
	require.Contains(t, c.ok("show", to.String()), "inbox: 0 messages")
}
