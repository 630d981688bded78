package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// pollOnce polls the ready tasks of typ once with poller, through an
// executor of the CLI's database.
func (c *cli) pollOnce(typ tasks.Type, poller executor.PollerFunc[int, json.RawMessage], opts ...executor.Option) *executor.Executor {
	c.t.Helper()
	e := executor.MustNew(testdb.Pool(c.t, c.url), executor.Config{BackoffMin: time.Hour, BackoffMax: time.Hour})
	executor.Register(e, typ, poller, opts...)
	_, _ = e.PollOnce(context.Background())
	return e
}

func TestHistory(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	id := c.create("--type", "job", "--message", `"hi"`)
	require.Equal(t, "no history (the task has not been polled yet, or its type records none)\n", c.ok("history", id.String()))
	e := c.pollOnce("job", func(ctx context.Context, t *executor.Task[int, json.RawMessage]) (executor.Action, error) {
		t.Inbox.Pop()
		t.State = 5
		return executor.Sleep(time.Hour), nil
	})
	c.ok("retry", id.String())
	c.pollOnce("job", func(ctx context.Context, t *executor.Task[int, json.RawMessage]) (executor.Action, error) {
		return executor.Action{}, errors.New("card declined\nby the bank")
	})
	c.ok("retry", id.String())
	c.pollOnce("job", func(ctx context.Context, t *executor.Task[int, json.RawMessage]) (executor.Action, error) {
		panic("nil map")
	})

	out := c.ok("history", id.String())
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 6, out)
	require.Regexp(t, `^ATTEMPT +OUTCOME +ACTION +BY +FINISHED +TOOK +POPPED +SPAWNED +SENT +STATE +ERROR$`, lines[0])
	require.Regexp(t, `^1 +committed +sleep +`+e.ID().String()+` +(now|\ds ago) +\d+ms +1 +0 +0 +\d+B +-$`, lines[1])
	require.Regexp(t, `^2 +operator +retry +\S+ +(now|\ds ago) +- +0 +0 +0 +\d+B +-$`, lines[2])
	require.Regexp(t, `^3 +failed +- +\S+ +(now|\ds ago) +\d+ms +0 +0 +0 +\d+B +card declined by the bank$`, lines[3])
	require.Regexp(t, `^5 +panicked +- +\S+ +(now|\ds ago) +\d+ms +0 +0 +0 +\d+B +poller panicked: nil map$`, lines[5])

	out = c.ok("history", id.String(), "--last", "1", "--stack")
	require.Contains(t, out, "attempt 5 panicked: poller panicked: nil map\ngoroutine")
	require.Contains(t, out, "TestHistory")

	var h []map[string]any
	require.NoError(t, json.Unmarshal([]byte(c.ok("history", id.String(), "--json")), &h))
	require.Len(t, h, 5)
	require.Equal(t, "committed", h[0]["outcome"])
	require.Equal(t, e.ID().String(), h[0]["executor"])
	require.Nil(t, h[0]["host"], "the executor ran no Run: not registered")
	require.Equal(t, "card declined\nby the bank", h[2]["error"])
	require.Nil(t, h[1]["executor"])
	require.NotNil(t, h[1]["actor"])
	require.NotEmpty(t, h[4]["stack"])
}

func TestHistoryErrors(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	unknown := tasks.NewID()
	requireError(t, c.run("history", unknown.String()), "history", "task not found: "+unknown.String())
	requireUsage(t, runCLI(t, nil, "", "history", unknown.String(), "--last", "x"), "history", `invalid --last "x"`)
}

func TestExecutors(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	require.Equal(t, "no executors registered\n", c.ok("executors"))
	require.Equal(t, "[]\n", c.ok("executors", "--json"))
	e := executor.MustNew(testdb.Pool(t, c.url), executor.Config{})
	executor.Register(e, "job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.Done(), nil
	}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	require.Eventually(t, func() bool { return strings.Contains(c.ok("executors"), e.ID().String()) }, testdb.Patience, 10*time.Millisecond)
	c.exec(`INSERT INTO corotask.executors (executor_id, host, pid, version, task_types, concurrency, expires_at)
		VALUES (gen_random_uuid(), 'gone', 9, 'v0.0.1', '{old}', 4, now() - interval '1 minute')`)

	out := c.ok("executors")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 3, out)
	require.Regexp(t, `^ID +HOST +PID +VERSION +STATE +CLAIMS +CONCURRENCY +STARTED +LAST_SEEN +TYPES$`, lines[0])
	host, _ := os.Hostname()
	require.Regexp(t, `^`+e.ID().String()+` +`+host+` +`+strconv.Itoa(os.Getpid())+` +\S+ +live +0 +100 +(now|\ds ago) +(now|\ds ago) +job$`, lines[1])
	require.Regexp(t, ` +gone +9 +v0.0.1 +stale +0 +4 +.* +old$`, lines[2])
	var list []map[string]any
	require.NoError(t, json.Unmarshal([]byte(c.ok("executors", "--json")), &list))
	require.Len(t, list, 2)
	require.Equal(t, false, list[0]["stale"])
	require.Equal(t, true, list[1]["stale"])

	cancel()
	require.NoError(t, <-done)
	require.Regexp(t, `(?m)^`+e.ID().String()+` +`+host+` +\d+ +\S+ +stopped `, c.ok("executors"))
	requireUsage(t, runCLI(t, nil, "", "executors", "x"), "executors", `unexpected argument "x"`)
}

func TestStats(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	require.Equal(t, "no tasks\n", c.ok("stats"))
	a := c.create("--type", "a")
	c.create("--type", "a")
	c.create("--type", "b", "--in", "1h")
	// Ready for three days: printed "3d" however long the test takes (up to
	// an hour).
	c.exec(`UPDATE corotask.tasks SET wake_at = now() - interval '3 days' WHERE task_id = $1`, a)

	out := c.ok("stats")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 3, out)
	require.Regexp(t, `^TYPE +READY +PAUSED +LIMITED +UNSERVED +SLEEPING +RETRYING +SUSPENDED +RUNNING +STALE +DONE +FAILED +CANCELED +OLDEST_READY +CONTROLS$`, lines[0])
	require.Regexp(t, `^a +2 +0 +0 +0 +0 +0 +0 +0 +0 +0 +0 +0 +3d +-$`, lines[1])
	require.Regexp(t, `^b +0 +0 +0 +0 +1 +0 +0 +0 +0 +0 +0 +0 +- +-$`, lines[2])
	var s []statsJSON
	require.NoError(t, json.Unmarshal([]byte(c.ok("stats", "--json")), &s))
	require.Len(t, s, 2)
	require.Equal(t, 2, s[0].Counts["ready"])
	require.Len(t, s[0].Counts, len(tasks.Statuses))
	require.GreaterOrEqual(t, s[0].OldestReadySec, (72 * time.Hour).Seconds())
	require.Less(t, s[0].OldestReadySec, (73 * time.Hour).Seconds())
	require.Zero(t, s[1].OldestReadySec)
	requireUsage(t, runCLI(t, nil, "", "stats", "x"), "stats", `unexpected argument "x"`)
}

func TestRetryRestartDropMessage(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	id := c.create("--type", "job", "--in", "1h")
	c.ok("send", id.String(), `"ok"`)
	c.ok("send", id.String(), `"poison"`)
	c.pollOnce("job", func(ctx context.Context, t *executor.Task[int, json.RawMessage]) (executor.Action, error) {
		return executor.Action{}, errors.New("cannot handle it")
	}, executor.MaxFailures(2))
	require.Equal(t, tasks.StatusRetrying, c.show(id).Status)

	require.Equal(t, "dropped message 2 of "+id.String()+`: {"at":`, c.ok("drop-message", id.String(), "2", "--digest", c.show(id).Inbox[1].Digest)[:len("dropped message 2 of ")+26+8])
	require.Len(t, c.show(id).Inbox, 1)
	require.Equal(t, "reset failures of, and retrying "+id.String()+" now\n", c.ok("retry", "--reset-failures", id.String()))
	s := c.show(id)
	require.Equal(t, tasks.StatusReady, s.Status)
	require.Zero(t, s.Failures)

	// Failed for good, then restarted.
	for range 2 {
		c.exec(`UPDATE corotask.tasks SET wake_at = now() WHERE task_id = $1`, id)
		c.pollOnce("job", func(ctx context.Context, t *executor.Task[int, json.RawMessage]) (executor.Action, error) {
			return executor.Action{}, errors.New("still broken")
		}, executor.MaxFailures(2))
	}
	require.Equal(t, tasks.StatusFailed, c.show(id).Status)
	requireError(t, c.run("retry", id.String()), "retry", "task has ended: "+id.String())
	require.Equal(t, "restarted "+id.String()+": ready now\n", c.ok("restart", id.String()))
	require.Equal(t, tasks.StatusReady, c.show(id).Status)
	out := c.ok("history", id.String())
	for _, action := range []string{"drop_message", "reset", "retry", "restart"} {
		require.Regexp(t, `(?m)^\d+ +operator +`+action+` `, out)
	}
}

func TestOperatorCommandErrors(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	unknown := tasks.NewID()
	ready := c.create("--type", "job")
	for _, cmd := range []string{"retry", "restart"} {
		requireError(t, c.run(cmd, unknown.String()), cmd, "task not found: "+unknown.String())
	}
	requireError(t, c.run("drop-message", unknown.String(), "1"), "drop-message", "task not found: "+unknown.String())
	requireError(t, c.run("retry", ready.String()), "retry",
		"task status does not allow this: "+ready.String()+": it is ready: only a retrying or sleeping task can be retried now")
	requireError(t, c.run("restart", ready.String()), "restart",
		"task status does not allow this: "+ready.String()+": it is ready: only a failed task can be restarted")
	requireError(t, c.run("drop-message", ready.String(), "1"), "drop-message",
		"no such message: "+ready.String()+": position 1: its inbox is empty")
	for _, pos := range []string{"0", "-1", "x", "1.5"} {
		requireUsage(t, runCLI(t, nil, "", "drop-message", ready.String(), "--", pos), "drop-message", `invalid POSITION "`+pos+`"`)
	}
	requireUsage(t, runCLI(t, nil, "", "drop-message", ready.String()), "drop-message", "missing POSITION argument")

	c.exec(`UPDATE corotask.tasks SET claim = gen_random_uuid(), heartbeat = now(), claim_expires_at = now() + interval '1 minute',
		wake_at = now() + interval '1 hour' WHERE task_id = $1`, ready)
	c.ok("send", ready.String(), "1")
	for _, args := range [][]string{{"retry", ready.String()}, {"drop-message", ready.String(), "1"}} {
		requireError(t, c.run(args...), args[0], "task is running: "+ready.String()+": an executor holds it: try again once its poll has ended")
	}
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	require.Equal(t, "short", truncate("short", 8))
	require.Equal(t, "exactly8", truncate("exactly8", 8))
	require.Equal(t, "too l...", truncate("too long by far", 8))
	require.Equal(t, "héhé...", truncate("héhéhéhéhé", 7), "counts characters, not bytes")
}
