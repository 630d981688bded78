package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/tasks"
)

func TestKeys(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	order := c.create("--type", "orders.checkout", "--key", "order-42", "--state", `{"n": 1}`)
	require.Equal(t, "order-42", *c.show(order).Key)
	plain := c.create("--type", "orders.checkout")
	require.Nil(t, c.show(plain).Key)

	// A second live task with the key is refused, naming the first.
	r := c.run("create", "--type", "orders.checkout", "--key", "order-42")
	requireError(t, r, "create", order.String())
	require.Contains(t, r.stderr, "task already exists")

	// send --key sends to the live task with the key (recorded in its
	// history as an operator's), or creates it.
	require.Equal(t, "sent message to "+order.String()+" (type orders.checkout, key order-42)\n",
		c.ok("send", "--type", "orders.checkout", "--key", "order-42", `"paid"`))
	s := c.show(order)
	require.Len(t, s.Inbox, 1)
	require.JSONEq(t, `"paid"`, string(s.Inbox[0].Body))
	require.Equal(t, "send", *s.History[len(s.History)-1].Action)

	out := c.ok("send", "--type", "carts.cart", "--key", "user 7", "--state", `{"items": []}`, `{"add": "apple"}`)
	id, err := tasks.ParseID(strings.TrimSuffix(strings.TrimPrefix(out, "sent message to "), " (type carts.cart, key user 7)\n"))
	require.NoError(t, err, out)
	var shown showJSON
	require.NoError(t, json.Unmarshal([]byte(c.ok("show", "--type", "carts.cart", "--key", "user 7", "--json")), &shown))
	require.Equal(t, id, shown.ID)
	require.Equal(t, "user 7", *shown.Key)
	require.JSONEq(t, `{"items": []}`, string(shown.State))
	require.Len(t, shown.Inbox, 1)
	require.JSONEq(t, `{"add": "apple"}`, string(shown.Inbox[0].Body))
	// From standard input too.
	r = c.runIn(`"pear"`, "send", "--type", "carts.cart", "--key", "user 7")
	require.Equal(t, exitOK, r.code, "%s", r)
	require.Len(t, c.show(id).Inbox, 2)

	human := c.ok("show", "--type", "orders.checkout", "--key", "order-42")
	require.Contains(t, human, "\nkey         order-42\n")
	require.Contains(t, human, order.String())

	// ls shows a KEY column when a task listed has a key, and filters on it.
	ls := c.ok("ls")
	require.True(t, strings.HasPrefix(ls, "ID "), ls)
	require.Contains(t, strings.SplitN(ls, "\n", 2)[0], " KEY ")
	require.Contains(t, ls, "order-42")
	ls = c.ok("ls", "--key", "order-42")
	require.Contains(t, ls, order.String())
	require.NotContains(t, ls, plain.String())
	require.NotContains(t, ls, id.String())
	var listed []taskJSON
	require.NoError(t, json.Unmarshal([]byte(c.ok("ls", "--key", "user 7", "--json")), &listed))
	require.Len(t, listed, 1)
	require.Equal(t, id, listed[0].ID)
	require.Equal(t, "user 7", *listed[0].Key)
	require.NotContains(t, strings.SplitN(c.ok("ls", "--type", "nothing"), "\n", 2)[0], "KEY")

	// tree shows the keys of a tree that has one.
	child := c.create("--type", "orders.line", "--parent", order.String(), "--key", "line-1")
	tree := c.ok("tree", order.String())
	require.Contains(t, tree, "order-42")
	require.Contains(t, tree, child.String())
	require.Contains(t, tree, "line-1")
	require.NotContains(t, c.ok("tree", plain.String()), "-\n")

	// Once the task has ended, its key is free.
	c.ok("cancel", order.String())
	requireError(t, c.run("show", "--type", "orders.checkout", "--key", "order-42"), "show", "no live task")
	again := c.create("--type", "orders.checkout", "--key", "order-42")
	require.NotEqual(t, order, again)
}

func TestKeyUsageErrors(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	for _, tc := range []struct {
		args []string
		cmd  string
		want string
	}{
		{[]string{"create", "--type", "t", "--key", ""}, "create", "--key: invalid task key: empty"},
		{[]string{"create", "--type", "t", "--key", strings.Repeat("k", 201)}, "create", "201 bytes, at most 200"},
		{[]string{"create", "--type", "t", "--key", "a\tb"}, "create", "control character U+0009"},
		{[]string{"send", "--key", "k", `"m"`}, "send", "--key needs --type"},
		{[]string{"send", "--type", "t", "--key", "", `"m"`}, "send", "invalid task key: empty"},
		{[]string{"send", "--type", "t", "--key", "k", "--from", tasks.NewID().String(), `"m"`}, "send", "--from does not go with --key"},
		{[]string{"send", "--type", "t", "--key", "k", "01JD7X3M5Q8R9S2T4V6W8Y0Z1A", `"m"`}, "send", "unexpected argument"},
		{[]string{"send", "--type", "t", "01JD7X3M5Q8R9S2T4V6W8Y0Z1A", `"m"`}, "send", "--type and --state go with --key"},
		{[]string{"send", "--type", "t", "--key", "k", "--state", "{", `"m"`}, "send", "--state"},
		{[]string{"show", "--key", "k"}, "show", "--key needs --type"},
		{[]string{"show", "--type", "t", "01JD7X3M5Q8R9S2T4V6W8Y0Z1A"}, "show", "--type goes with --key"},
		{[]string{"ls", "--key", ""}, "ls", "--key: invalid task key: empty"},
	} {
		requireUsage(t, c.run(tc.args...), tc.cmd, tc.want)
	}
	require.Zero(t, c.count(), "usage errors create nothing")
}
