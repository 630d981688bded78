package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/envelope"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

var errDeclined = errors.New("card declined")

// A poll that returns Fail ends its task as failed at once, MaxFailures
// notwithstanding: nothing else of the poll is kept, and the parent is told.
func TestFailEndsTaskAtOnceAndTellsParent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	cfg := fastConfig(t)
	cfg.BackoffMin = time.Millisecond
	e := executor.MustNew(db, cfg)
	executor.Register(e, "charge", executor.PollerFunc[counterState, string](
		func(ctx context.Context, t *executor.Task[counterState, string]) (executor.Action, error) {
			t.Inbox.Pop()
			t.State.Count++
			t.Spawn("charge", nil, nil)
			if t.Failures == 0 {
				return executor.Action{}, errors.New("gateway busy") // retried
			}
			return executor.Action{}, fmt.Errorf("charge: %w", executor.Fail(errDeclined))
		}), executor.MaxFailures(10))
	parent, err := tasks.Create(ctx, db, tasks.Spec{Type: "parent", WakeAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	child, err := tasks.Create(ctx, db, tasks.Spec{Type: "charge", Parent: parent, State: counterState{Count: 1}, Message: "m1"})
	require.NoError(t, err)

	var pollErr error
	waitFor(t, "the child to fail", func() bool {
		if _, err := e.PollOnce(ctx); err != nil {
			pollErr = err
		}
		task, err := tasks.Get(ctx, db, child)
		require.NoError(t, err)
		return task.Status == tasks.StatusFailed
	})
	var f *executor.FailError
	require.ErrorAs(t, pollErr, &f, "PollOnce returns the poll's error")
	require.ErrorIs(t, pollErr, errDeclined)
	require.Equal(t, "card declined", f.Error(), "Fail's text is the wrapped error's")

	task, err := tasks.Get(ctx, db, child)
	require.NoError(t, err)
	require.Equal(t, 2, task.Failures, "one retried failure, then the one for good")
	require.Equal(t, "charge: card declined", task.LastError)
	require.NotNil(t, task.DoneAt)
	require.JSONEq(t, `{"Count":1}`, string(task.State), "the failed poll's state is not kept")
	require.Equal(t, 1, task.InboxLen, "the popped message is not taken")
	kids, err := tasks.List(ctx, db, tasks.Filter{Parent: child})
	require.NoError(t, err)
	require.Empty(t, kids, "the failed poll's spawns are not kept")

	h, err := tasks.History(ctx, db, child, tasks.HistoryOptions{})
	require.NoError(t, err)
	require.Len(t, h, 2)
	require.Equal(t, tasks.PollFailed, h[1].Outcome)
	require.Equal(t, "charge: card declined", h[1].Error)

	p, err := tasks.Get(ctx, db, parent)
	require.NoError(t, err)
	require.Len(t, p.Inbox, 1)
	m := envelope.Decode[json.RawMessage](parent, [][]byte{p.Inbox[0]})[0]
	require.Equal(t, child, m.From)
	require.True(t, m.Done)
	require.Equal(t, "charge: card declined", m.Err)
	require.Equal(t, tasks.StatusReady, p.Status, "the completion woke the parent")

	stats, err := tasks.Stats(ctx, db)
	require.NoError(t, err)
	for _, s := range stats {
		if s.Type == "charge" {
			require.Equal(t, 1, s.Counts[tasks.StatusFailed])
		}
	}
}

// Fail from an OnCommit function fails the poll as a whole, for good.
func TestFailFromOnCommitEndsTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	executor.Register(e, "ledger", executor.PollerFunc[int, int](
		func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
			t.OnCommit(func(ctx context.Context, tx pgx.Tx) error { return executor.Fail(errDeclined) })
			return executor.Done(), nil
		}), executor.MaxFailures(10))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "ledger"})
	require.NoError(t, err)
	_, err = e.PollOnce(ctx)
	require.ErrorIs(t, err, errDeclined)
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusFailed, task.Status)
	require.Equal(t, 1, task.Failures)
	require.Contains(t, task.LastError, "card declined")
}

// A panic is never a failure for good, even with a Fail for its value.
func TestPanicIsRetriedEvenWithFail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	cfg := fastConfig(t)
	cfg.BackoffMin, cfg.BackoffMax = time.Hour, time.Hour
	e := executor.MustNew(db, cfg)
	executor.Register(e, "jumpy", executor.PollerFunc[int, int](
		func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
			panic(executor.Fail(errDeclined))
		}), executor.MaxFailures(10))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "jumpy"})
	require.NoError(t, err)
	_, err = e.PollOnce(ctx)
	var p *executor.PanicError
	require.ErrorAs(t, err, &p)
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusRetrying, task.Status)
	require.Equal(t, 1, task.Failures)
}

func TestTryPollSurfacesFail(t *testing.T) {
	t.Parallel()
	p := executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
		if m, ok := t.Inbox.Pop(); ok && m.Body == "bad card" {
			return executor.Action{}, executor.Fail(errDeclined)
		}
		return executor.Done(), nil
	})
	res, err := executor.TryPoll(context.Background(), p, executor.TryInput[int, string]{
		Type: "charge", Messages: []inbox.Message[string]{{Body: "bad card"}}})
	require.Zero(t, res)
	require.EqualError(t, err, "card declined", "the poll's error, as last_error would hold it")
	var f *executor.FailError
	require.ErrorAs(t, err, &f)
	require.ErrorIs(t, err, errDeclined)
}

func TestFailNil(t *testing.T) {
	t.Parallel()
	err := executor.Fail(nil)
	require.EqualError(t, err, "failed")
	var f *executor.FailError
	require.ErrorAs(t, err, &f)
}
