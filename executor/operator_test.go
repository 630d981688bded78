package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/envelope"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

func sessionUser(t *testing.T, db tasks.DB) string {
	t.Helper()
	var role string
	require.NoError(t, db.QueryRow(context.Background(), `SELECT session_user`).Scan(&role))
	return role
}

// lastEntry returns the last entry of the task's history.
func lastEntry(t *testing.T, db tasks.DB, id tasks.ID) tasks.HistoryEntry {
	t.Helper()
	h := history(t, db, id)
	require.NotEmpty(t, h)
	return h[len(h)-1]
}

func requireOperatorEntry(t *testing.T, db tasks.DB, id tasks.ID, action string) tasks.HistoryEntry {
	t.Helper()
	r := lastEntry(t, db, id)
	require.Equal(t, tasks.OperatorAction, r.Outcome)
	require.Equal(t, action, r.Action)
	require.Equal(t, sessionUser(t, db), r.Actor)
	return r
}

// Retry ends the backoff of a failed task: it is polled now.
func TestRetryNow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	var polls atomic.Int32
	executor.Register(e, "job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		if polls.Add(1) == 1 {
			return executor.Action{}, errors.New("flaky")
		}
		return executor.Done(), nil
	}), executor.Backoff(time.Hour, time.Hour))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	require.ErrorIs(t, tasks.Retry(ctx, db, id), tasks.ErrWrongStatus, "a ready task needs no retry")
	err = tasks.Retry(ctx, db, id)
	require.ErrorContains(t, err, "it is ready: only a retrying or sleeping task can be retried now")
	require.ErrorContains(t, err, id.String())

	_, err = e.PollOnce(ctx)
	require.Error(t, err)
	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "in backoff for an hour")

	require.NoError(t, tasks.Retry(ctx, db, id))
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusReady, task.Status)
	require.Equal(t, 1, task.Failures, "a retry keeps the count")
	requireOperatorEntry(t, db, id, "retry")
	n, err = e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []int{1, 2, 3}, attempts(history(t, db, id)))

	require.ErrorIs(t, tasks.Retry(ctx, db, id), tasks.ErrEnded)
	require.ErrorIs(t, tasks.Retry(ctx, db, tasks.NewID()), tasks.ErrNotFound)
	require.ErrorContains(t, tasks.Retry(ctx, db, tasks.ID{}), "no task (zero id)")
}

// ResetFailures gives a task its type's MaxFailures again.
func TestResetFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	executor.Register(e, "job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.Action{}, errors.New("down")
	}), executor.MaxFailures(3), executor.Backoff(time.Hour, time.Hour))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	fail := func() {
		t.Helper()
		require.NoError(t, tasks.Retry(ctx, db, id))
		_, err := e.PollOnce(ctx)
		require.ErrorContains(t, err, "down")
	}
	_, err = e.PollOnce(ctx)
	require.Error(t, err)
	fail()
	require.NoError(t, tasks.ResetFailures(ctx, db, id))
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Zero(t, task.Failures)
	require.Empty(t, task.LastError)
	require.Equal(t, tasks.StatusSleeping, task.Status, "when it is polled is unchanged")
	requireOperatorEntry(t, db, id, "reset")
	fail()
	fail()
	task, err = tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusRetrying, task.Status, "two failures since the reset, not three")
	fail()
	task, err = tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusFailed, task.Status)
	require.ErrorIs(t, tasks.ResetFailures(ctx, db, id), tasks.ErrEnded)
}

// Restart brings a failed task back with its last committed state; its
// parent, told of the failure, is told again when it ends.
func TestRestartFailedTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	var broken atomic.Bool
	broken.Store(true)
	executor.Register(e, "kid", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		if t.State == 0 {
			t.State = 7
			return executor.Yield(), nil
		}
		if broken.Load() {
			t.State = 1000 // discarded: the poll fails
			return executor.Action{}, errors.New("bug")
		}
		return executor.DoneWith(t.State), nil
	}), executor.MaxFailures(1))
	var completions []inbox.Message[int]
	executor.Register(e, "parent", executor.PollerFunc[bool, int](func(ctx context.Context, t *executor.Task[bool, int]) (executor.Action, error) {
		if !t.State {
			t.State = true
			t.Spawn("kid", nil, nil)
		}
		for {
			m, ok := t.Inbox.Pop()
			if !ok {
				break
			}
			completions = append(completions, m)
		}
		return executor.Suspend(), nil
	}))
	parent, err := tasks.Create(ctx, db, tasks.Spec{Type: "parent"})
	require.NoError(t, err)
	for range 4 {
		_, _ = e.PollOnce(ctx)
	}
	require.Len(t, completions, 1)
	require.Equal(t, "bug", completions[0].Err)
	kid := completions[0].From
	task, err := tasks.Get(ctx, db, kid)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusFailed, task.Status)

	broken.Store(false)
	require.NoError(t, tasks.Restart(ctx, db, kid))
	task, err = tasks.Get(ctx, db, kid)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusReady, task.Status)
	require.JSONEq(t, "7", string(task.State), "its last committed state")
	require.Zero(t, task.Failures)
	require.Nil(t, task.DoneAt)
	requireOperatorEntry(t, db, kid, "restart")
	for range 2 {
		_, err = e.PollOnce(ctx)
		require.NoError(t, err)
	}
	require.Len(t, completions, 2, "the parent hears of the child's second end")
	require.Empty(t, completions[1].Err)
	require.Equal(t, 7, completions[1].Body)

	err = tasks.Restart(ctx, db, kid)
	require.ErrorIs(t, err, tasks.ErrWrongStatus)
	require.ErrorContains(t, err, "it is done: only a failed task can be restarted")
	err = tasks.Restart(ctx, db, parent)
	require.ErrorContains(t, err, "it is suspended")
	require.ErrorIs(t, tasks.Restart(ctx, db, tasks.NewID()), tasks.ErrNotFound)
}

// DropMessage removes one message from the inbox, and the history keeps it.
func TestDropMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job", WakeAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	for _, m := range []string{"a", "poison", "c"} {
		require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, m))
	}
	msg, err := tasks.DropMessage(ctx, db, id, 2, testdb.InboxDigest(t, db, id, 2))
	require.NoError(t, err)
	var env envelope.Envelope
	require.NoError(t, json.Unmarshal(msg, &env))
	require.JSONEq(t, `"poison"`, string(env.Body))
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Len(t, task.Inbox, 2)
	require.Equal(t, `{"body":"a","from":null}`, testdb.WithoutSentAt(t, task.Inbox[0]))
	require.Equal(t, `{"body":"c","from":null}`, testdb.WithoutSentAt(t, task.Inbox[1]))
	r := requireOperatorEntry(t, db, id, "drop_message")
	require.JSONEq(t, string(msg), string(r.Message))

	_, err = tasks.DropMessage(ctx, db, id, 3, tasks.MessageDigest(nil))
	require.ErrorIs(t, err, tasks.ErrNoMessage)
	require.ErrorContains(t, err, "position 3: its inbox holds 2 message(s), at positions 1 to 2")
	_, err = tasks.DropMessage(ctx, db, id, 0, tasks.MessageDigest(nil))
	require.ErrorContains(t, err, "positions start at 1")
	_, err = tasks.DropMessage(ctx, db, tasks.NewID(), 1, tasks.MessageDigest(nil))
	require.ErrorIs(t, err, tasks.ErrNotFound)
	first := testdb.InboxDigest(t, db, id, 1)
	require.NoError(t, tasks.Cancel(ctx, db, id))
	_, err = tasks.DropMessage(ctx, db, id, 1, first)
	require.ErrorIs(t, err, tasks.ErrEnded)
	empty, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	_, err = tasks.DropMessage(ctx, db, empty, 1, tasks.MessageDigest(nil))
	require.ErrorContains(t, err, "its inbox is empty")
}

// A failed child whose parent has ended is not restarted: it would live under
// an ended parent, with nobody to tell and out of reach of a cancel.
func TestRestartRefusesAChildOfAnEndedParent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	parent, err := tasks.Create(ctx, db, tasks.Spec{Type: "parent"})
	require.NoError(t, err)
	kid, err := tasks.Create(ctx, db, tasks.Spec{Type: "kid", Parent: parent})
	require.NoError(t, err)
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET done_at = now(), outcome = 'failed', wake_at = NULL, failures = 3 WHERE task_id = $1`, kid)
	require.NoError(t, err)
	require.NoError(t, tasks.Cancel(ctx, db, parent))

	err = tasks.Restart(ctx, db, kid)
	require.ErrorIs(t, err, tasks.ErrWrongStatus)
	require.ErrorContains(t, err, "parent")
	task, err := tasks.Get(ctx, db, kid)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusFailed, task.Status, "left as it was")
}
