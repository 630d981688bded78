package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestKeyWindow(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	require.Equal(t, "key window of orders.checkout: none\n", c.ok("key-window", "orders.checkout"))
	require.Equal(t, "key window of orders.checkout: 24h0m0s\n", c.ok("key-window", "orders.checkout", "24h"))
	require.Equal(t, "key window of orders.checkout: 24h0m0s\n", c.ok("key-window", "orders.checkout"))

	// Within the window, the key of an ended task is refused, naming it.
	order := c.create("--type", "orders.checkout", "--key", "order-42")
	c.ok("cancel", order.String())
	r := c.run("create", "--type", "orders.checkout", "--key", "order-42")
	requireError(t, r, "create", order.String())
	require.Contains(t, r.stderr, "key window of 24:00:00")

	require.Equal(t, "key window of orders.checkout: none\n", c.ok("key-window", "orders.checkout", "0"))
	c.create("--type", "orders.checkout", "--key", "order-42")

	requireUsage(t, c.run("key-window"), "key-window", "want TYPE [DURATION]")
	requireUsage(t, c.run("key-window", "orders.checkout", "soon"), "key-window", `invalid DURATION "soon"`)
	requireUsage(t, c.run("key-window", "--", "orders.checkout", "-1h"), "key-window", "negative (0 removes the window)")
	requireUsage(t, c.run("key-window", " orders", "1h"), "key-window", "leading or trailing space")
}
