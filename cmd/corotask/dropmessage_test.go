package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
)

// drop-message drops only the message the operator read: without --digest
// it drops nothing and prints the message at the position with its digest;
// with the digest of a message that a poll's commit has since moved (the
// inbox shifted), it refuses and nothing is lost; with the digest of the
// message now at the position, it drops that one.
func TestDropMessageDropsOnlyTheMessageNamed(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	id := c.create("--type", "job", "--in", "1h")
	for _, m := range []string{`"first"`, `"poison"`, `"third"`} {
		c.ok("send", id.String(), m)
	}
	read := c.show(id)
	require.Len(t, read.Inbox, 3)
	poison := read.Inbox[1].Digest
	require.Len(t, poison, 24)
	require.Contains(t, c.ok("show", id.String()), "inbox digests (corotask drop-message TASK N --digest D):\n  1. "+
		read.Inbox[0].Digest+"\n  2. "+poison+"\n  3. "+read.Inbox[2].Digest+"\n")

	r := c.run("drop-message", id.String(), "2")
	require.Equal(t, exitError, r.code, "%s", r)
	require.Contains(t, r.stdout, "message 2 of "+id.String()+": from outside, sent ")
	require.Contains(t, r.stdout, ", digest "+poison+"\n  \"poison\"\n")
	require.Contains(t, r.stderr, "nothing dropped: name the message by its digest to drop it: corotask drop-message "+
		id.String()+" 2 --digest "+poison)
	require.Len(t, c.show(id).Inbox, 3, "nothing dropped")

	// A poll takes the first message meanwhile: "third" is at position 2.
	testdb.PopFirst(t, testdb.Pool(t, c.url), id)
	requireError(t, c.run("drop-message", id.String(), "2", "--digest", poison), "drop-message",
		"no such message: "+id.String()+": position 2 holds message "+read.Inbox[2].Digest+", not "+poison+
			": the inbox changed since it was read; nothing was dropped (see 'corotask show "+id.String()+"')")
	require.Equal(t, []string{`"poison"`, `"third"`}, inboxBodies(c.show(id)), "nothing lost")

	out := c.ok("drop-message", id.String(), "1", "--digest", poison)
	require.Contains(t, out, "dropped message 1 of "+id.String()+": ")
	require.Contains(t, out, `"body":"poison"`)
	require.Equal(t, []string{`"third"`}, inboxBodies(c.show(id)))

	requireUsage(t, c.run("drop-message", id.String(), "1", "--digest", "xyz"), "drop-message", `invalid --digest "xyz"`)
	requireError(t, c.run("drop-message", id.String(), "2"), "drop-message",
		"no such message: "+id.String()+": position 2: its inbox holds 1 message(s), at positions 1 to 1")
}

func inboxBodies(s showJSON) []string {
	out := make([]string, 0, len(s.Inbox))
	for _, m := range s.Inbox {
		b, _ := json.Marshal(m.Body)
		out = append(out, string(b))
	}
	return out
}
