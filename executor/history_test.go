package executor_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
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
	specs := make([]tasks.Spec, n)
	for i := range specs {
		specs[i] = tasks.Spec{Type: "job"}
	}
	ids, err := tasks.CreateMany(ctx, db, specs)
	require.NoError(t, err)
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

// Retention deletes a task's history with it.
func TestRetentionDeletesHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	cfg := fastConfig(t)
	cfg.Retention = time.Hour
	e := executor.MustNew(db, cfg)
	executor.Register(e, "job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.Done(), nil
	}))
	old, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	kept, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	_, err = e.PollOnce(ctx)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET done_at = now() - interval '2 hours' WHERE task_id = $1`, old)
	require.NoError(t, err)
	n, err := e.DeleteExpired(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	var left int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM corotask.history WHERE task_id = $1`, old).Scan(&left))
	require.Zero(t, left)
	require.Len(t, history(t, db, kept), 1)
}

func findExecutor(t *testing.T, db tasks.DB, id tasks.ID) (tasks.Executor, bool) {
	t.Helper()
	all, err := tasks.Executors(context.Background(), db)
	require.NoError(t, err)
	for _, x := range all {
		if x.ID == id {
			return x, true
		}
	}
	return tasks.Executor{}, false
}

// A running executor has its row: registered when Run starts, refreshed
// while it runs, deleted when it stops. A claim names its executor.
func TestExecutorRegistration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	cfg := fastConfig(t)
	// Refreshed often; alive for hours without one, however slow the machine.
	cfg.HeartbeatTimeout, cfg.HeartbeatInterval = testdb.LongHeartbeat, 300*time.Millisecond
	e := executor.MustNew(db, cfg)
	release := make(chan struct{})
	executor.Register(e, "b.job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		<-release
		return executor.Done(), nil
	}))
	executor.Register(e, "a.job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.Done(), nil
	}))
	stop := start(t, e)
	var first tasks.Executor
	waitFor(t, "the executor's row", func() bool {
		var ok bool
		first, ok = findExecutor(t, db, e.ID())
		return ok
	})
	host, _ := os.Hostname()
	require.Equal(t, host, first.Host)
	require.Equal(t, os.Getpid(), first.PID)
	require.Equal(t, []tasks.Type{"a.job", "b.job"}, first.Types)
	require.Equal(t, 8, first.Concurrency)
	require.NotEmpty(t, first.Version)
	require.False(t, first.Stale)
	require.True(t, first.ExpiresAt.After(first.LastSeen))

	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "b.job"})
	require.NoError(t, err)
	task := waitStatus(t, db, id, tasks.StatusRunning)
	require.Equal(t, e.ID(), task.ClaimedBy)
	require.NotNil(t, task.ClaimedAt)
	waitFor(t, "a refresh", func() bool {
		x, ok := findExecutor(t, db, e.ID())
		return ok && x.LastSeen.After(first.LastSeen) && x.Claims == 1
	})
	close(release)
	waitStatus(t, db, id, tasks.StatusDone)
	stop()
	x, ok := findExecutor(t, db, e.ID())
	require.True(t, ok, "kept, so that histories name it")
	require.NotNil(t, x.StoppedAt, "marked stopped on a graceful stop")
	require.False(t, x.Stale)
	later, err := tasks.Create(ctx, db, tasks.Spec{Type: "a.job"})
	require.NoError(t, err)
	task, err = tasks.Get(ctx, db, later)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusUnserved, task.Status, "no executor serves it any more")
}

// insertExecutor registers an executor the way a running one does, alive
// or long expired.
func insertExecutor(t *testing.T, db *pgxpool.Pool, alive bool, types ...string) tasks.ID {
	t.Helper()
	id := tasks.NewID()
	expires := "now() + interval '1 minute'"
	if !alive {
		expires = "now() - interval '1 minute'"
	}
	_, err := db.Exec(context.Background(), `INSERT INTO corotask.executors (executor_id, host, pid, version, task_types, concurrency, expires_at)
		VALUES ($1, 'elsewhere', 7, 'v0', $2, 1, `+expires+`)`, id, types)
	require.NoError(t, err)
	return id
}

// A ready task is unserved when executors have registered and no live one
// serves its type; an expired executor does not count.
func TestUnservedAndStaleExecutors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	orphan, err := tasks.Create(ctx, db, tasks.Spec{Type: "orphan"})
	require.NoError(t, err)
	served, err := tasks.Create(ctx, db, tasks.Spec{Type: "served"})
	require.NoError(t, err)
	status := func(id tasks.ID) tasks.Status {
		task, err := tasks.Get(ctx, db, id)
		require.NoError(t, err)
		return task.Status
	}
	require.Equal(t, tasks.StatusReady, status(orphan), "no executor has registered: nothing is known")

	dead := insertExecutor(t, db, false, "served", "orphan")
	x, ok := findExecutor(t, db, dead)
	require.True(t, ok)
	require.True(t, x.Stale)
	require.Equal(t, tasks.StatusUnserved, status(orphan), "only a dead executor serves it")

	insertExecutor(t, db, true, "served")
	require.Equal(t, tasks.StatusUnserved, status(orphan))
	require.Equal(t, tasks.StatusReady, status(served))
	unserved, err := tasks.List(ctx, db, tasks.Filter{Status: tasks.StatusUnserved})
	require.NoError(t, err)
	require.Len(t, unserved, 1)
	require.Equal(t, orphan, unserved[0].ID)
}

// Messages carry the time they were sent, completions included.
func TestMessagesSayWhenTheyWereSent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	var sent []time.Time
	executor.Register(e, "parent", executor.PollerFunc[bool, string](func(ctx context.Context, t *executor.Task[bool, string]) (executor.Action, error) {
		if !t.State {
			t.State = true
			t.Spawn("kid", nil, nil)
		}
		for {
			m, ok := t.Inbox.Pop()
			if !ok {
				break
			}
			sent = append(sent, m.SentAt)
		}
		return executor.Suspend(), nil
	}))
	executor.Register(e, "kid", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.Done(), nil
	}))
	before := time.Now()
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "parent"})
	require.NoError(t, err)
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, "hello"))
	for range 3 {
		_, err = e.PollOnce(ctx)
		require.NoError(t, err)
	}
	require.Len(t, sent, 2, "the message, then the child's completion")
	for _, at := range sent {
		require.WithinDuration(t, before, at, time.Minute)
	}
	require.False(t, sent[1].Before(sent[0]))
}

// With the server's autovacuum off, the executor vacuums the history too:
// retention and the cap delete its rows all the time.
func TestVacuumIfNeededVacuumsHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	var autovacuum string
	require.NoError(t, db.QueryRow(ctx, "SHOW autovacuum").Scan(&autovacuum))
	_, err := db.Exec(ctx, `INSERT INTO corotask.history (task_id, attempt, outcome)
		SELECT gen_random_uuid(), 1, 'committed' FROM generate_series(1, 3000)`)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `DELETE FROM corotask.history`)
	require.NoError(t, err)
	dead := func() int {
		var n int
		_, _ = db.Exec(ctx, "SELECT pg_stat_force_next_flush()")
		require.NoError(t, db.QueryRow(ctx, "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'corotask.history'::regclass").Scan(&n))
		return n
	}
	waitFor(t, "the dead rows in the statistics", func() bool { return dead() >= 3000 })
	done, err := e.VacuumIfNeeded(ctx)
	require.NoError(t, err)
	require.Equal(t, autovacuum == "off", done, "vacuums only when autovacuum is off")
	if done {
		waitFor(t, "the vacuum in the statistics", func() bool { return dead() < 1000 })
	}
}
