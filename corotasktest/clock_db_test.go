package corotasktest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/corotasktest"
	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// napper sleeps an hour at its first poll, fails its second once when told
// to, and then ends with how many polls it took (a failed one not counted).
type napper struct{ Polls int }

func pollNapper(failOnce bool) executor.PollerFunc[napper, struct{}] {
	return func(ctx context.Context, t *executor.Task[napper, struct{}]) (executor.Action, error) {
		t.State.Polls++
		switch {
		case t.State.Polls == 1:
			return executor.Sleep(time.Hour), nil
		case failOnce && t.State.Polls == 2 && t.Failures == 0:
			return executor.Action{}, errors.New("the service is down")
		}
		return executor.DoneWith(t.State.Polls), nil
	}
}

func newClockExecutor(t *testing.T, cfg executor.Config, failOnce bool) (*corotasktest.Clock, *pgxpool.Pool, *executor.Executor, executor.Handle[napper, struct{}]) {
	clock := corotasktest.NewClock()
	db := corotasktest.NewDB(t, corotasktest.WithClock(clock))
	cfg.Logger = corotasktest.Logger(t)
	e := executor.MustNew(db, cfg)
	h := executor.Register(e, "test.napper", pollNapper(failOnce))
	return clock, db, e, h
}

// runs runs e until idle and says how many polls ran.
func runs(t *testing.T, e *executor.Executor) int {
	t.Helper()
	n, err := corotasktest.RunUntilIdle(context.Background(), e)
	require.NoError(t, err)
	return n
}

// A Sleep passes when the clock is advanced, not before.
func TestClockWakesASleepingTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock, db, e, h := newClockExecutor(t, executor.Config{}, false)
	id, err := h.Create(ctx, db, napper{})
	require.NoError(t, err)

	require.Equal(t, 1, runs(t, e), "the first poll sleeps")
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusSleeping, task.Status)
	require.True(t, clock.Now().Add(time.Hour).Equal(*task.WakeAt), "counted from the clock: %s", task.WakeAt)

	clock.Advance(time.Hour - time.Second)
	require.Zero(t, runs(t, e), "not yet")
	clock.Advance(time.Second)
	require.Equal(t, 1, runs(t, e), "due when the clock says so")
	require.Equal(t, 2, corotasktest.Result[int](t, db, id))
}

// A failed poll's backoff is counted from the clock, and passes with it.
func TestClockPassesABackoff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock, db, e, h := newClockExecutor(t, executor.Config{BackoffMin: 10 * time.Minute, BackoffMax: 10 * time.Minute}, true)
	id, err := h.Create(ctx, db, napper{})
	require.NoError(t, err)
	require.Equal(t, 1, runs(t, e))
	clock.Advance(time.Hour)

	n, err := corotasktest.RunUntilIdle(ctx, e)
	require.ErrorContains(t, err, "the service is down")
	require.Equal(t, 1, n)
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusRetrying, task.Status)
	require.False(t, task.WakeAt.Before(clock.Now().Add(5*time.Minute)), "a backoff of about 10 minutes from the clock (with jitter), not from the server's time: %s", task.WakeAt)

	require.Zero(t, runs(t, e), "still backing off")
	clock.Advance(20 * time.Minute)
	require.Equal(t, 1, runs(t, e))
	require.Equal(t, 2, corotasktest.Result[int](t, db, id))
}

// An ended task is deleted once the clock passes its retention.
func TestClockPassesARetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock, db, e, h := newClockExecutor(t, executor.Config{Retention: 24 * time.Hour}, false)
	id, err := h.Create(ctx, db, napper{Polls: 1})
	require.NoError(t, err)
	require.Equal(t, 1, runs(t, e))
	require.Equal(t, 2, corotasktest.Result[int](t, db, id))

	n, err := e.DeleteExpired(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "kept for its retention")
	clock.Advance(24*time.Hour + time.Second)
	n, err = e.DeleteExpired(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = tasks.Get(ctx, db, id)
	require.ErrorIs(t, err, tasks.ErrNotFound)
}

// A claim that its executor stopped renewing (it crashed) expires by the
// clock, and the task is taken over.
func TestClockExpiresAnAbandonedClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock, db, e, h := newClockExecutor(t, executor.Config{}, false)
	id, err := h.Create(ctx, db, napper{Polls: 1})
	require.NoError(t, err)
	testdb.Claim(t, db, id, 1) // by an executor that then crashed; expires in a minute

	require.Zero(t, runs(t, e), "the claim holds")
	clock.Advance(2 * time.Minute)
	require.Equal(t, 1, runs(t, e), "taken over")
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusDone, task.Status)
	require.Equal(t, 2, task.Attempts, "the attempt of the crashed executor, then the executor's")
}
