package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/envelope"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

func TestErrorAndPanicBackOffAndKeepStateAndMessages(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"error", "panic"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := testdb.New(t)
			cfg := fastConfig(t)
			cfg.BackoffMin, cfg.BackoffMax = time.Hour, time.Hour
			e := executor.MustNew(db, cfg)
			executor.Register(e, "flaky", failingPoller(mode))
			id, err := tasks.Create(ctx, db, tasks.Spec{Type: "flaky", State: counterState{Count: 1}, Message: "m1"})
			require.NoError(t, err)

			n, err := e.PollOnce(ctx)
			require.Equal(t, 1, n)
			require.Error(t, err)
			if mode == "panic" {
				var p *executor.PanicError
				require.ErrorAs(t, err, &p)
				require.Contains(t, string(p.Stack), "failingPoller")
			}
			task, err := tasks.Get(ctx, db, id)
			require.NoError(t, err)
			require.Equal(t, tasks.StatusRetrying, task.Status)
			require.JSONEq(t, `{"Count":1}`, string(task.State))
			require.Equal(t, 1, task.InboxLen, "the popped message is still there")
			require.Equal(t, 1, task.Failures)
			if mode == "panic" {
				require.Contains(t, task.LastError, "poller panicked: boom")
			} else {
				require.Equal(t, "poll failed on purpose", task.LastError)
			}
			require.True(t, task.WakeAt.After(time.Now().Add(20*time.Minute)), "backed off: %s", task.WakeAt)
			require.True(t, task.WakeAt.Before(time.Now().Add(61*time.Minute)))
			kids, err := tasks.List(ctx, db, tasks.Filter{Parent: id})
			require.NoError(t, err)
			require.Empty(t, kids, "no effect of the failed poll is kept")
		})
	}
}

func TestSuccessResetsFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	cfg := fastConfig(t)
	cfg.BackoffMin = time.Millisecond
	e := executor.MustNew(db, cfg)
	executor.Register(e, "flaky", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		if t.Failures < 2 {
			return executor.Action{}, fmt.Errorf("failure %d", t.Failures+1)
		}
		t.State = t.Failures
		return executor.Suspend(), nil
	}))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "flaky"})
	require.NoError(t, err)
	waitFor(t, "three polls", func() bool {
		_, _ = e.PollOnce(ctx)
		task, err := tasks.Get(ctx, db, id)
		require.NoError(t, err)
		return task.Status == tasks.StatusSuspended
	})
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Zero(t, task.Failures)
	require.Empty(t, task.LastError)
	require.JSONEq(t, "2", string(task.State))
}

func TestMaxFailuresEndsTaskAndTellsParent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	cfg := fastConfig(t)
	cfg.BackoffMin = time.Millisecond
	e := executor.MustNew(db, cfg)
	executor.Register(e, "flaky", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.Action{}, errors.New("always fails")
	}), executor.MaxFailures(3))
	parent, err := tasks.Create(ctx, db, tasks.Spec{Type: "parent", WakeAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	child, err := tasks.Create(ctx, db, tasks.Spec{Type: "flaky", Parent: parent})
	require.NoError(t, err)
	waitFor(t, "the child to fail", func() bool {
		_, _ = e.PollOnce(ctx)
		task, err := tasks.Get(ctx, db, child)
		require.NoError(t, err)
		return task.Status == tasks.StatusFailed
	})
	task, err := tasks.Get(ctx, db, child)
	require.NoError(t, err)
	require.Equal(t, 3, task.Failures)
	require.NotNil(t, task.DoneAt)

	p, err := tasks.Get(ctx, db, parent)
	require.NoError(t, err)
	require.Len(t, p.Inbox, 1)
	m := envelope.Decode[json.RawMessage](parent, [][]byte{p.Inbox[0]})[0]
	require.Equal(t, child, m.From)
	require.True(t, m.Done)
	require.Equal(t, "always fails", m.Err)
	require.Equal(t, tasks.StatusReady, p.Status, "the completion woke the parent")
}

// A message to a task waiting out the backoff of a failed poll does not
// wake it early; the retry sees every message.
func TestMessagesDoNotCutBackoffShort(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	cfg := fastConfig(t)
	cfg.BackoffMin = time.Hour
	cfg.BackoffMax = 2 * time.Hour
	e := executor.MustNew(db, cfg)
	var seen []string
	fail := true
	executor.Register(e, "job", executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
		if fail {
			fail = false
			return executor.Action{}, errBoom
		}
		for {
			m, ok := t.Inbox.Pop()
			if !ok {
				break
			}
			seen = append(seen, m.Body)
		}
		return executor.Suspend(), nil
	}))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job", Message: "first"})
	require.NoError(t, err)
	_, err = e.PollOnce(ctx)
	require.ErrorIs(t, err, errBoom)
	before, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusRetrying, before.Status)

	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, "second"))
	after, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusRetrying, after.Status, "a message does not end the backoff")
	require.Equal(t, before.WakeAt, after.WakeAt)
	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n)

	// The backoff over, the retry sees both messages.
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET wake_at = now() WHERE task_id = $1`, id)
	require.NoError(t, err)
	n, err = e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []string{"first", "second"}, seen)
}

var errBoom = boomError{}

type boomError struct{}

func (boomError) Error() string { return "boom" }

// A type's Backoff overrides the executor's.
func TestBackoffPerType(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	executor.Register(e, "slow", failingPoller("error"), executor.Backoff(time.Hour, 2*time.Hour))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "slow"})
	require.NoError(t, err)
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, "x"))
	_, err = e.PollOnce(ctx)
	require.Error(t, err)
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusRetrying, task.Status)
	require.True(t, task.WakeAt.After(time.Now().Add(29*time.Minute)), "wakes at %s", task.WakeAt)

	_, err = executor.RegisterSafely(e, "bad", failingPoller("error"), executor.Backoff(time.Hour, time.Minute))
	require.ErrorContains(t, err, "register bad: Backoff(1h0m0s, 1m0s): min and max must not be negative, and min must not exceed max")
}
