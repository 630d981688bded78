package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
)

// TestShowPanic: show prints the first line of a panic that ended the last
// poll, not its stack, and where to read the stack.
func TestShowPanic(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	id := c.create("--type", "job")
	c.pollOnce("job", func(ctx context.Context, t *executor.Task[int, json.RawMessage]) (executor.Action, error) {
		panic("nil map\nwritten to")
	})
	out := c.ok("show", id.String())
	require.Regexp(t, `(?m)^last_error +poller panicked: nil map \(see 'corotask history --stack `+id.String()+`'\)$`, out)
	require.NotRegexp(t, `(?m)^last_error .*goroutine`, out)
	require.Contains(t, c.ok("history", "--stack", id.String()), "goroutine")

	// A task whose type records no history: the stack is in show --json.
	c.exec(`DELETE FROM corotask.history WHERE task_id = $1`, id)
	out = c.ok("show", id.String())
	require.Regexp(t, `(?m)^last_error +poller panicked: nil map \(the stack: 'corotask show --json `+id.String()+`'\)$`, out)
	require.Contains(t, *c.show(id).LastError, "\n\ngoroutine ", "--json has the error whole")
}
