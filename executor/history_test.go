package executor_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// history returns the task's whole history.
func history(t *testing.T, db tasks.DB, id tasks.ID) []tasks.HistoryEntry {
	t.Helper()
	h, err := tasks.History(context.Background(), db, id, tasks.HistoryOptions{})
	require.NoError(t, err)
	return h
}

func attempts(h []tasks.HistoryEntry) []int {
	out := make([]int, len(h))
	for i, e := range h {
		out[i] = e.Attempt
	}
	return out
}

// A committed poll's row says what it did: its action, the messages it
// popped, the children it spawned, the messages it sent, the state's size,
// and who polled it when.
func TestHistoryOfACommittedPoll(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	sink, err := tasks.Create(ctx, db, tasks.Spec{Type: "sink", WakeAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	executor.Register(e, "job", executor.PollerFunc[[]string, string](func(ctx context.Context, t *executor.Task[[]string, string]) (executor.Action, error) {
		for {
			m, ok := t.Inbox.Pop()
			if !ok {
				break
			}
			t.State = append(t.State, m.Body)
		}
		t.Spawn("kid", nil, nil)
		t.Send(sink, "hello")
		return executor.Sleep(time.Hour), nil
	}))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, "one"))
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, "two"))
	before := time.Now()
	_, err = e.PollOnce(ctx)
	require.NoError(t, err)

	h := history(t, db, id)
	require.Len(t, h, 1)
	r := h[0]
	require.Equal(t, id, r.Task)
	require.Equal(t, 1, r.Attempt)
	require.Equal(t, tasks.Committed, r.Outcome)
	require.Equal(t, "sleep", r.Action)
	require.Equal(t, e.ID(), r.Executor)
	require.NotNil(t, r.ClaimedAt)
	require.WithinDuration(t, before, *r.ClaimedAt, time.Minute)
	require.False(t, r.FinishedAt.Before(*r.ClaimedAt))
	require.Equal(t, 2, r.Popped)
	require.Equal(t, 1, r.Spawned)
	require.Equal(t, 1, r.Sent)
	require.Positive(t, r.StateBytes)
	require.Nil(t, r.State, "no snapshot unless the type asks for it")
	require.NotNil(t, r.WakeAt)
	require.WithinDuration(t, time.Now().Add(time.Hour), *r.WakeAt, time.Minute)
	require.Empty(t, r.Error)

	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, 1, task.Attempts)
	require.True(t, task.ClaimedBy.IsZero(), "no executor holds it now")
}

// A failed poll's row has its error; a panicked one's, its stack too.
func TestHistoryOfFailedAndPanickedPolls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	executor.Register(e, "job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		if t.Failures == 0 {
			return executor.Action{}, errors.New("the payment service said no")
		}
		panic("nil map somewhere")
	}), executor.Backoff(time.Millisecond, time.Millisecond))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	_, err = e.PollOnce(ctx)
	require.Error(t, err)
	waitFor(t, "the backoff to pass", func() bool {
		n, err := e.PollOnce(ctx)
		return n == 1 && err != nil
	})

	h := history(t, db, id)
	require.Len(t, h, 2)
	require.Equal(t, tasks.PollFailed, h[0].Outcome)
	require.Equal(t, "the payment service said no", h[0].Error)
	require.Empty(t, h[0].Stack)
	require.NotNil(t, h[0].WakeAt, "when it retries")
	require.Equal(t, tasks.Panicked, h[1].Outcome)
	require.Equal(t, "poller panicked: nil map somewhere", h[1].Error)
	require.Contains(t, h[1].Stack, "TestHistoryOfFailedAndPanickedPolls")
	for _, r := range h {
		require.Equal(t, e.ID(), r.Executor)
		require.Zero(t, r.Popped+r.Spawned+r.Sent, "nothing of a failed poll is kept")
	}
}

// A poll whose commit is refused by the fence (another claim took the task
// meanwhile) is recorded as claim_lost.
func TestHistoryOfAPollWhoseClaimWasLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	executor.Register(e, "job", executor.PollerFunc[int, int](func(ctx context.Context, task *executor.Task[int, int]) (executor.Action, error) {
		_, err := db.Exec(ctx, `UPDATE corotask.tasks SET claim = gen_random_uuid() WHERE task_id = $1`, task.ID)
		require.NoError(t, err)
		return executor.Done(), nil
	}))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	_, err = e.PollOnce(ctx)
	require.NoError(t, err)
	h := history(t, db, id)
	require.Len(t, h, 1)
	require.Equal(t, tasks.ClaimLost, h[0].Outcome)
	require.Equal(t, 1, h[0].Attempt)
	require.Equal(t, e.ID(), h[0].Executor)
	require.Contains(t, h[0].Error, "commit refused")
}

// A task canceled while polled: the poll is recorded as canceled, and the
// cancellation as an operator action, with the database role that did it.
func TestHistoryOfAPollCanceledWhileRunning(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	started := make(chan struct{})
	executor.Register(e, "job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		close(started)
		<-ctx.Done()
		return executor.Action{}, ctx.Err()
	}))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	start(t, e)
	<-started
	require.NoError(t, tasks.Cancel(ctx, db, id))
	var role string
	require.NoError(t, db.QueryRow(ctx, `SELECT session_user`).Scan(&role))
	waitFor(t, "the poll's row", func() bool { return len(history(t, db, id)) == 2 })
	h := history(t, db, id)
	require.Equal(t, []int{1, 2}, attempts(h))
	require.Equal(t, tasks.PollCanceled, h[0].Outcome)
	require.Equal(t, e.ID(), h[0].Executor)
	require.Equal(t, tasks.OperatorAction, h[1].Outcome)
	require.Equal(t, "cancel", h[1].Action)
	require.Equal(t, role, h[1].Actor)
	require.True(t, h[1].Executor.IsZero())
}

// The takeover of an expired claim records the dead executor's attempt as
// taken_over, then the new poll's own.
func TestHistoryOfATakeover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	executor.Register(e, "job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.Done(), nil
	}))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	dead := tasks.NewID()
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET claim = gen_random_uuid(), heartbeat = now() - interval '1 minute',
		claim_expires_at = now() - interval '30 seconds', attempts = 1, claimed_by = $2, claimed_at = now() - interval '2 minutes'
		WHERE task_id = $1`, id, dead)
	require.NoError(t, err)
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusStale, task.Status)
	require.Equal(t, dead, task.ClaimedBy)

	_, err = e.PollOnce(ctx)
	require.NoError(t, err)
	h := history(t, db, id)
	require.Equal(t, []int{1, 2}, attempts(h))
	require.Equal(t, tasks.TakenOver, h[0].Outcome)
	require.Equal(t, dead, h[0].Executor)
	require.NotNil(t, h[0].ClaimedAt)
	require.Contains(t, h[0].Error, "stopped renewing its claim")
	require.Equal(t, tasks.Committed, h[1].Outcome)
	require.Equal(t, e.ID(), h[1].Executor)
}

// Polls committed together in one batch get a row each.
func TestHistoryOfABatchCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	executor.Register(e, "job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.Done(), nil
	}))
	const n = 200
	ids := createN(t, db, "job", n)
	start(t, e)
	waitFor(t, "every task to end", func() bool {
		done, err := tasks.List(ctx, db, tasks.Filter{Status: tasks.StatusDone, Limit: n})
		require.NoError(t, err)
		return len(done) == n
	})
	var rows, committed int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE outcome = 'committed' AND action = 'done' AND attempt = 1 AND executor_id = $1)
		FROM corotask.history`, e.ID()).Scan(&rows, &committed))
	require.Equal(t, n, rows)
	require.Equal(t, n, committed)
	require.Len(t, history(t, db, ids[n-1]), 1)
}

// A task's history keeps its first and its last attempts.
func TestHistoryIsCapped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	cfg := fastConfig(t)
	cfg.HistoryKeepFirst, cfg.HistoryKeepLast = 2, 3
	e := executor.MustNew(db, cfg)
	executor.Register(e, "job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		t.State++
		if t.State == 6 && t.Failures == 0 {
			return executor.Action{}, errors.New("once")
		}
		return executor.Yield(), nil
	}), executor.Backoff(time.Millisecond, time.Millisecond))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	for polls := 0; polls < 12; {
		n, _ := e.PollOnce(ctx)
		polls += n
		if polls == 3 && n == 1 {
			require.NoError(t, tasks.ResetFailures(ctx, db, id)) // attempt 4
		}
	}
	h := history(t, db, id)
	require.Equal(t, []int{1, 2, 4, 11, 12, 13}, attempts(h), "operator actions are kept")

	last, err := tasks.History(ctx, db, id, tasks.HistoryOptions{Last: 2})
	require.NoError(t, err)
	require.Equal(t, []int{12, 13}, attempts(last))
	_, err = tasks.History(ctx, db, tasks.NewID(), tasks.HistoryOptions{})
	require.ErrorIs(t, err, tasks.ErrNotFound)
	_, err = tasks.History(ctx, db, id, tasks.HistoryOptions{Last: -1})
	require.ErrorContains(t, err, "Last (-1) must not be negative")
}

// History(false) records no polls of the type; SnapshotState keeps the
// state each poll left.
func TestHistoryOptionsPerType(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	poller := executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		t.State += 41
		if t.State > 41 {
			return executor.Action{}, errors.New("again")
		}
		return executor.Yield(), nil
	})
	executor.Register(e, "quiet", poller, executor.History(false))
	executor.Register(e, "snap", poller, executor.SnapshotState(true), executor.Backoff(time.Millisecond, time.Millisecond))
	quiet, err := tasks.Create(ctx, db, tasks.Spec{Type: "quiet"})
	require.NoError(t, err)
	snap, err := tasks.Create(ctx, db, tasks.Spec{Type: "snap"})
	require.NoError(t, err)
	_, err = e.PollOnce(ctx)
	require.NoError(t, err)
	_, err = e.PollOnce(ctx)
	require.Error(t, err)

	require.Empty(t, history(t, db, quiet))
	task, err := tasks.Get(ctx, db, quiet)
	require.NoError(t, err)
	require.Equal(t, 2, task.Attempts, "attempts are counted all the same")
	h := history(t, db, snap)
	require.Len(t, h, 2)
	require.JSONEq(t, "41", string(h[0].State))
	require.Equal(t, tasks.PollFailed, h[1].Outcome)
	require.JSONEq(t, "41", string(h[1].State), "a failed poll keeps the stored state")
}
