package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/envelope"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// A poll that outlives its PollTimeout has its context canceled with
// ErrPollTimeout as the cause and fails, whatever it returns: the error it
// returns on seeing the cancel, or a success returned late by a poller that
// ignores its context, which is then not committed.
func TestPollTimeoutFailsThePoll(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"returns ctx error", "returns late success"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := testdb.New(t)
			cfg := fastConfig(t)
			cfg.BackoffMin, cfg.BackoffMax = time.Hour, time.Hour
			e := executor.MustNew(db, cfg)
			var cause error
			executor.Register(e, "slow", executor.PollerFunc[counterState, string](
				func(ctx context.Context, t *executor.Task[counterState, string]) (executor.Action, error) {
					t.State.Count = 99
					t.Inbox.Pop()
					t.Spawn("child", nil, nil)
					<-ctx.Done()
					cause = context.Cause(ctx)
					if mode == "returns ctx error" {
						return executor.Action{}, ctx.Err()
					}
					return executor.DoneWith("late"), nil
				}), executor.PollTimeout(20*time.Millisecond), executor.MaxFailures(3))
			id, err := tasks.Create(ctx, db, tasks.Spec{Type: "slow", State: counterState{Count: 1}, Message: "m1"})
			require.NoError(t, err)

			n, err := e.PollOnce(ctx)
			require.Equal(t, 1, n)
			require.ErrorIs(t, err, executor.ErrPollTimeout)
			require.ErrorIs(t, cause, executor.ErrPollTimeout)
			require.EqualError(t, cause, "poll timed out after 20ms (the PollTimeout of slow)")

			task, err := tasks.Get(ctx, db, id)
			require.NoError(t, err)
			require.Equal(t, tasks.StatusRetrying, task.Status, "a failure counted, backing off")
			require.Equal(t, 1, task.Failures)
			require.Equal(t, "poll timed out after 20ms (the PollTimeout of slow)", task.LastError)
			require.JSONEq(t, `{"Count":1}`, string(task.State), "nothing of the poll is committed")
			require.Equal(t, 1, task.InboxLen)
			require.Empty(t, task.Result)
			kids, err := tasks.List(ctx, db, tasks.Filter{Parent: id})
			require.NoError(t, err)
			require.Empty(t, kids)
			h, err := tasks.History(ctx, db, id, tasks.HistoryOptions{})
			require.NoError(t, err)
			require.Len(t, h, 1)
			require.Equal(t, tasks.PollFailed, h[0].Outcome)
		})
	}
}

// Timeouts count toward MaxFailures in a running executor: the task ends as
// failed and its parent hears why.
func TestPollTimeoutCountsTowardMaxFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	cfg := fastConfig(t)
	cfg.BackoffMin = time.Millisecond
	e := executor.MustNew(db, cfg)
	executor.Register(e, "stuck", executor.PollerFunc[int, int](
		func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
			<-ctx.Done()
			return executor.Yield(), nil
		}), executor.PollTimeout(10*time.Millisecond), executor.MaxFailures(2))
	parent, err := tasks.Create(ctx, db, tasks.Spec{Type: "parent", WakeAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	child, err := tasks.Create(ctx, db, tasks.Spec{Type: "stuck", Parent: parent})
	require.NoError(t, err)
	start(t, e)

	task := waitStatus(t, db, child, tasks.StatusFailed)
	require.Equal(t, 2, task.Failures)
	require.Equal(t, "poll timed out after 10ms (the PollTimeout of stuck)", task.LastError)
	p, err := tasks.Get(ctx, db, parent)
	require.NoError(t, err)
	require.Len(t, p.Inbox, 1)
	m := envelope.Decode[json.RawMessage](parent, [][]byte{p.Inbox[0]})[0]
	require.True(t, m.Done)
	require.Equal(t, task.LastError, m.Err)
}

// flightKey carries, in a poll's context, the executor's context of the
// poll (what PollStart receives), which the PollTimeout's context is under.
type flightKey struct{}

type flightHooks struct{ executor.NoHooks }

func (flightHooks) PollStart(ctx context.Context, _ *executor.PollInfo) context.Context {
	return context.WithValue(ctx, flightKey{}, ctx)
}

// A poll that timed out but is still running when the executor stops is
// released by the shutdown, as any poll is, not counted as a failure.
func TestPollTimeoutThenShutdownReleases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	cfg := fastConfig(t)
	cfg.ShutdownTimeout = time.Millisecond
	cfg.Hooks = flightHooks{}
	e := executor.MustNew(db, cfg)
	timedOut := make(chan error, 1)
	executor.Register(e, "stubborn", executor.PollerFunc[int, int](
		func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
			<-ctx.Done()
			timedOut <- context.Cause(ctx)
			flight := ctx.Value(flightKey{}).(context.Context)
			<-flight.Done() // canceled by the shutdown
			if !errors.Is(context.Cause(flight), executor.ErrShutdown) {
				return executor.Action{}, context.Cause(flight)
			}
			return executor.Done(), nil
		}), executor.PollTimeout(10*time.Millisecond), executor.MaxFailures(1))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "stubborn"})
	require.NoError(t, err)
	stop := start(t, e)
	require.ErrorIs(t, <-timedOut, executor.ErrPollTimeout)
	stop()

	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusUnserved, task.Status, "released: ready for the next executor of its type")
	require.Zero(t, task.Failures)
	require.Empty(t, task.LastError)
}

func TestPollTimeoutOption(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	done := executor.PollerFunc[int, int](func(ctx context.Context, _ *executor.Task[int, int]) (executor.Action, error) {
		_, ok := ctx.Deadline()
		require.False(t, ok, "a PollTimeout is no context deadline")
		return executor.Done(), nil
	})
	_, err := executor.RegisterSafely(e, "neg", done, executor.PollTimeout(-time.Second))
	require.EqualError(t, err, "register neg: PollTimeout(-1s): must not be negative (0: no timeout)")
	_, err = executor.RegisterSafely(e, "none", done, executor.PollTimeout(0))
	require.NoError(t, err)
	_, err = executor.RegisterSafely(e, "hour", done, executor.PollTimeout(time.Hour))
	require.NoError(t, err)

	for _, typ := range []tasks.Type{"none", "hour"} {
		id, err := tasks.Create(ctx, db, tasks.Spec{Type: typ})
		require.NoError(t, err)
		_, err = e.PollOnce(ctx)
		require.NoError(t, err)
		task, err := tasks.Get(ctx, db, id)
		require.NoError(t, err)
		require.Equal(t, tasks.StatusDone, task.Status, "a poll within its timeout commits")
	}
}
