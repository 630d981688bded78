package executor_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/corotasktest"
	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/tasks"
)

// waiter waits up to an hour for a reply; it spawns a child first when
// Child is set, whose completion comes before the reply's deadline.
type waiter struct {
	ReplyBy   time.Time   // Receive's deadline
	Deadlines []time.Time // each poll's deadline as Receive left it
	Child     bool
	Spawned   bool
	Children  int // completions seen
}

type receiveRig struct {
	clock *corotasktest.Clock
	db    tasks.DB
	e     *executor.Executor
	h     executor.Handle[waiter, string]
}

func newReceiveRig(t *testing.T) *receiveRig {
	r := &receiveRig{clock: corotasktest.NewClock()}
	pool := corotasktest.NewDB(t, corotasktest.WithClock(r.clock))
	r.db = pool
	r.e = executor.MustNew(pool, executor.Config{Logger: corotasktest.Logger(t)})
	kid := executor.Register(r.e, "test.kid", executor.PollerFunc[int, string](
		func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
			if t.State == 0 {
				t.State++
				return executor.Sleep(10 * time.Minute), nil
			}
			return executor.Done(), nil
		}))
	r.h = executor.Register(r.e, "test.waiter", executor.PollerFunc[waiter, string](
		func(ctx context.Context, t *executor.Task[waiter, string]) (executor.Action, error) {
			if t.State.Child && !t.State.Spawned {
				t.State.Spawned = true
				kid.Spawn(t, 0)
			}
			defer func() { t.State.Deadlines = append(t.State.Deadlines, t.State.ReplyBy) }()
			for {
				m, ok, wait := executor.Receive(t, &t.State.ReplyBy, time.Hour)
				switch {
				case ok && m.Done:
					t.State.Children++ // and wait on
				case ok:
					return executor.DoneWith("reply: " + m.Body), nil
				case wait.IsZero():
					return executor.DoneWith("timed out"), nil
				default:
					return wait, nil
				}
			}
		}))
	return r
}

func (r *receiveRig) run(t *testing.T) int {
	t.Helper()
	n, err := corotasktest.RunUntilIdle(context.Background(), r.e)
	require.NoError(t, err)
	return n
}

func TestReceiveMessageBeforeDeadline(t *testing.T) {
	t.Parallel()
	r := newReceiveRig(t)
	ctx := context.Background()
	id, err := r.h.Create(ctx, r.db, waiter{})
	require.NoError(t, err)
	start := r.clock.Now()
	require.Equal(t, 1, r.run(t))
	task, err := tasks.Get(ctx, r.db, id)
	require.NoError(t, err)
	require.True(t, start.Add(time.Hour).Equal(*task.WakeAt), "sleeps until the deadline: %s", task.WakeAt)

	r.clock.Advance(59 * time.Minute)
	require.NoError(t, r.h.Send(ctx, r.db, id, "yes"))
	require.Equal(t, 1, r.run(t))
	require.Equal(t, "reply: yes", corotasktest.Result[string](t, r.db, id))
}

func TestReceiveTimesOut(t *testing.T) {
	t.Parallel()
	r := newReceiveRig(t)
	ctx := context.Background()
	id, err := r.h.Create(ctx, r.db, waiter{})
	require.NoError(t, err)
	require.Equal(t, 1, r.run(t))
	r.clock.Advance(time.Hour - time.Second)
	require.Zero(t, r.run(t), "not yet")
	r.clock.Advance(time.Second)
	require.Equal(t, 1, r.run(t))
	require.Equal(t, "timed out", corotasktest.Result[string](t, r.db, id))
	// A message after the timeout finds the task ended.
	require.ErrorIs(t, r.h.Send(ctx, r.db, id, "late"), tasks.ErrEnded)
}

// A child's completion wakes the task in the middle of its wait: the wait
// goes on to the same deadline, which then times out.
func TestReceiveDeadlineSurvivesAChildCompletion(t *testing.T) {
	t.Parallel()
	r := newReceiveRig(t)
	ctx := context.Background()
	id, err := r.h.Create(ctx, r.db, waiter{Child: true})
	require.NoError(t, err)
	start := r.clock.Now()
	r.run(t) // the waiter, and its child's first poll
	r.clock.Advance(10 * time.Minute)
	require.Equal(t, 2, r.run(t), "the child ends, its parent hears of it")
	st := corotasktest.State[waiter](t, r.db, id)
	require.Equal(t, 1, st.Children)
	deadline := start.Add(time.Hour)
	require.Len(t, st.Deadlines, 2)
	for _, d := range st.Deadlines {
		require.True(t, deadline.Equal(d), "deadline %s, not %s", d, deadline)
	}
	r.clock.Advance(50*time.Minute - time.Second)
	require.Zero(t, r.run(t), "not yet")
	r.clock.Advance(time.Second)
	require.Equal(t, 1, r.run(t))
	require.Equal(t, "timed out", corotasktest.Result[string](t, r.db, id))
}

// Receive without a database: the deadline is set from the poll's time,
// kept, and cleared by a message or a timeout.
func TestReceiveTryPoll(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	p := executor.PollerFunc[waiter, string](func(ctx context.Context, t *executor.Task[waiter, string]) (executor.Action, error) {
		m, ok, wait := executor.Receive(t, &t.State.ReplyBy, time.Minute)
		switch {
		case ok:
			return executor.DoneWith(m.Body), nil
		case wait.IsZero():
			return executor.DoneWith("timed out"), nil
		}
		return wait, nil
	})
	res, err := executor.TryPoll(ctx, p, executor.TryInput[waiter, string]{Now: now})
	require.NoError(t, err)
	require.Equal(t, executor.SleepUntil(now.Add(time.Minute)), res.Action)
	require.Equal(t, now.Add(time.Minute), res.State.ReplyBy)

	res, err = executor.TryPoll(ctx, p, executor.TryInput[waiter, string]{Now: now.Add(30 * time.Second), State: res.State})
	require.NoError(t, err)
	require.Equal(t, executor.SleepUntil(now.Add(time.Minute)), res.Action, "the same deadline")

	msg, err := executor.TryPoll(ctx, p, executor.TryInput[waiter, string]{Now: now.Add(2 * time.Minute), State: res.State,
		Messages: []inbox.Message[string]{{Body: "late but here"}}})
	require.NoError(t, err)
	require.Equal(t, executor.DoneWith("late but here"), msg.Action, "a message waiting wins over the deadline")
	require.True(t, msg.State.ReplyBy.IsZero())

	res, err = executor.TryPoll(ctx, p, executor.TryInput[waiter, string]{Now: now.Add(time.Minute), State: res.State})
	require.NoError(t, err)
	require.Equal(t, executor.DoneWith("timed out"), res.Action)
	require.True(t, res.State.ReplyBy.IsZero())
}

// A poll whose window holds only children's completions, with more messages
// beyond it, yields to see them rather than judge the deadline.
func TestReceiveYieldsWhenMoreWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	p := executor.PollerFunc[waiter, string](func(ctx context.Context, t *executor.Task[waiter, string]) (executor.Action, error) {
		for {
			m, ok, wait := executor.Receive(t, &t.State.ReplyBy, time.Minute)
			switch {
			case ok && m.Done:
				continue // a child ended; wait on
			case ok:
				return executor.DoneWith(m.Body), nil
			case wait.IsZero():
				return executor.DoneWith("timed out"), nil
			}
			return wait, nil
		}
	})
	past := now.Add(-time.Hour) // the deadline passed: only the next window can tell
	res, err := executor.TryPoll(ctx, p, executor.TryInput[waiter, string]{Now: now, State: waiter{ReplyBy: past},
		Messages: []inbox.Message[string]{{Done: true, From: tasks.NewID()}}, More: true})
	require.NoError(t, err)
	require.Equal(t, executor.Yield(), res.Action)
	require.Equal(t, past, res.State.ReplyBy, "the wait goes on")
}
