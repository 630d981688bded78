package executor_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/corotasktest"
	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/tasks"
)

// wakeLog records the reasons each poll of a task woke for, in order.
type wakeLog struct {
	mu    sync.Mutex
	polls []executor.WakeReasons
}

func (l *wakeLog) add(w executor.WakeReasons) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.polls = append(l.polls, w)
}

func (l *wakeLog) all() []executor.WakeReasons {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]executor.WakeReasons(nil), l.polls...)
}

// wakeRig is a database with a test clock and an executor whose
// "test.woke" tasks record why each poll woke and act as step says (given
// the poll's number, from 1).
type wakeRig struct {
	clock *corotasktest.Clock
	db    *pgxpool.Pool
	e     *executor.Executor
	h     executor.Handle[int, string]
	log   wakeLog
}

func newWakeRig(t *testing.T, step func(n int, t *executor.Task[int, string]) (executor.Action, error)) *wakeRig {
	r := &wakeRig{clock: corotasktest.NewClock()}
	r.db = corotasktest.NewDB(t, corotasktest.WithClock(r.clock))
	r.e = executor.MustNew(r.db, executor.Config{Logger: corotasktest.Logger(t),
		BackoffMin: time.Minute, BackoffMax: time.Minute})
	r.h = executor.Register(r.e, "test.woke", executor.PollerFunc[int, string](
		func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
			r.log.add(t.Woke)
			for {
				if _, ok := t.Inbox.Pop(); !ok {
					break
				}
			}
			n := t.State + 1
			act, err := step(n, t)
			if err == nil {
				t.State = n
			}
			return act, err
		}))
	return r
}

// run polls until idle and returns how many polls ran.
func (r *wakeRig) run(t *testing.T) int {
	t.Helper()
	n, err := corotasktest.RunUntilIdle(context.Background(), r.e)
	require.NoError(t, err)
	return n
}

func (r *wakeRig) create(t *testing.T) tasks.ID {
	t.Helper()
	id, err := r.h.Create(context.Background(), r.db, 0)
	require.NoError(t, err)
	return id
}

func (r *wakeRig) send(t *testing.T, id tasks.ID) {
	t.Helper()
	require.NoError(t, r.h.Send(context.Background(), r.db, id, "hello"))
}

// sleepThenDone sleeps an hour at the first poll and ends at the next.
func sleepThenDone(n int, _ *executor.Task[int, string]) (executor.Action, error) {
	if n == 1 {
		return executor.Sleep(time.Hour), nil
	}
	return executor.Done(), nil
}

func TestWokeFirstPoll(t *testing.T) {
	t.Parallel()
	r := newWakeRig(t, func(int, *executor.Task[int, string]) (executor.Action, error) { return executor.Done(), nil })
	r.create(t)
	msg := "first"
	_, err := r.h.CreateAt(context.Background(), r.db, 0, &msg, time.Time{})
	require.NoError(t, err)
	require.Equal(t, 2, r.run(t))
	require.ElementsMatch(t, []executor.WakeReasons{executor.WokeFirst, executor.WokeFirst | executor.WokeMessage}, r.log.all())
}

func TestWokeMessage(t *testing.T) {
	t.Parallel()
	r := newWakeRig(t, func(n int, _ *executor.Task[int, string]) (executor.Action, error) {
		if n == 1 {
			return executor.Suspend(), nil
		}
		return executor.Done(), nil
	})
	id := r.create(t)
	require.Equal(t, 1, r.run(t))
	r.send(t, id)
	require.Equal(t, 1, r.run(t))
	require.Equal(t, []executor.WakeReasons{executor.WokeFirst, executor.WokeMessage}, r.log.all())
	require.True(t, r.log.all()[1].Message())
}

func TestWokeTimer(t *testing.T) {
	t.Parallel()
	r := newWakeRig(t, sleepThenDone)
	r.create(t)
	require.Equal(t, 1, r.run(t))
	r.clock.Advance(time.Hour)
	require.Equal(t, 1, r.run(t))
	require.Equal(t, []executor.WakeReasons{executor.WokeFirst, executor.WokeTimer}, r.log.all())
}

// A message that comes before the Sleep's time wakes the task for itself
// alone; one that comes after the time came adds to the timer.
func TestWokeMessageAndTimer(t *testing.T) {
	t.Parallel()
	r := newWakeRig(t, func(n int, _ *executor.Task[int, string]) (executor.Action, error) {
		if n < 3 {
			return executor.Sleep(time.Hour), nil
		}
		return executor.Done(), nil
	})
	id := r.create(t)
	require.Equal(t, 1, r.run(t))
	r.send(t, id) // early: the timer's reason goes
	require.Equal(t, 1, r.run(t))
	r.clock.Advance(time.Hour)
	r.send(t, id) // the time came, and a message
	require.Equal(t, 1, r.run(t))
	got := r.log.all()
	require.Equal(t, []executor.WakeReasons{executor.WokeFirst, executor.WokeMessage, executor.WokeMessage | executor.WokeTimer}, got)
	require.Equal(t, "message+timer", got[2].String())
}

// A failed poll's retry says so, with the backoff's timer; the failed
// poll's own reasons stand, as nothing of it was committed.
func TestWokeRetry(t *testing.T) {
	t.Parallel()
	r := newWakeRig(t, func(n int, t *executor.Task[int, string]) (executor.Action, error) {
		switch {
		case n == 1:
			return executor.Sleep(time.Hour), nil
		case n == 2 && t.Failures == 0:
			return executor.Action{}, errors.New("the service is down")
		}
		return executor.Done(), nil
	})
	id := r.create(t)
	require.Equal(t, 1, r.run(t))
	r.clock.Advance(time.Hour)
	_, err := corotasktest.RunUntilIdle(context.Background(), r.e)
	require.ErrorContains(t, err, "the service is down")
	r.send(t, id) // during the backoff: it does not cut it short
	require.Zero(t, r.run(t))
	r.clock.Advance(time.Minute)
	require.Equal(t, 1, r.run(t))
	require.Equal(t, []executor.WakeReasons{
		executor.WokeFirst,
		executor.WokeTimer,
		executor.WokeTimer | executor.WokeRetry | executor.WokeMessage,
	}, r.log.all())
}

// A first poll that fails is retried as a first poll still.
func TestWokeRetryOfFirstPoll(t *testing.T) {
	t.Parallel()
	r := newWakeRig(t, func(n int, t *executor.Task[int, string]) (executor.Action, error) {
		if t.Failures == 0 {
			return executor.Action{}, errors.New("not yet")
		}
		return executor.Done(), nil
	})
	r.create(t)
	_, err := corotasktest.RunUntilIdle(context.Background(), r.e)
	require.Error(t, err)
	r.clock.Advance(time.Minute)
	require.Equal(t, 1, r.run(t))
	got := r.log.all()
	require.Equal(t, executor.WokeFirst|executor.WokeRetry|executor.WokeTimer, got[1])
	require.True(t, got[1].First() && got[1].Retry() && got[1].Timer())
}

// An operator's retry of a sleeping task wakes it for that alone: its
// timer did not come.
func TestWokeOperatorRetry(t *testing.T) {
	t.Parallel()
	r := newWakeRig(t, sleepThenDone)
	id := r.create(t)
	require.Equal(t, 1, r.run(t))
	require.NoError(t, tasks.Retry(context.Background(), r.db, id))
	require.Equal(t, 1, r.run(t))
	got := r.log.all()
	require.Equal(t, []executor.WakeReasons{executor.WokeFirst, executor.WokeOperator}, got)
	require.True(t, got[1].Operator())
	require.False(t, got[1].Timer())
}

// An operator's message is a message, and an operator's.
func TestWokeOperatorSend(t *testing.T) {
	t.Parallel()
	r := newWakeRig(t, sleepThenDone)
	id := r.create(t)
	require.Equal(t, 1, r.run(t))
	require.NoError(t, inbox.SendAsOperator(context.Background(), r.db, id, tasks.ID{}, "hi"))
	require.Equal(t, 1, r.run(t))
	require.Equal(t, executor.WokeMessage|executor.WokeOperator, r.log.all()[1])
}

func TestWokeYield(t *testing.T) {
	t.Parallel()
	r := newWakeRig(t, func(n int, _ *executor.Task[int, string]) (executor.Action, error) {
		if n == 1 {
			return executor.Yield(), nil
		}
		return executor.Done(), nil
	})
	r.create(t)
	require.Equal(t, 2, r.run(t))
	require.Equal(t, []executor.WakeReasons{executor.WokeFirst, executor.WokeYield}, r.log.all())
}

// A child's completion wakes its parent as such, with or without eager
// children (a child polled by the commit of its parent, or claimed).
func TestWokeChild(t *testing.T) {
	t.Parallel()
	for _, eager := range []bool{true, false} {
		clock := corotasktest.NewClock()
		db := corotasktest.NewDB(t, corotasktest.WithClock(clock))
		e := executor.MustNew(db, executor.Config{Logger: corotasktest.Logger(t), DisableEagerChildren: !eager})
		var parent, child wakeLog
		kid := executor.Register(e, "test.kid", executor.PollerFunc[int, string](
			func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
				child.add(t.Woke)
				if t.State == 0 {
					t.State++
					return executor.Sleep(time.Minute), nil
				}
				return executor.Done(), nil
			}))
		h := executor.Register(e, "test.parent", executor.PollerFunc[int, string](
			func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
				parent.add(t.Woke)
				if t.State == 0 {
					t.State++
					kid.SpawnWith(t, 0, "go")
					return executor.Suspend(), nil
				}
				return executor.Done(), nil
			}))
		_, err := h.Create(context.Background(), db, 0)
		require.NoError(t, err)
		_, err = corotasktest.RunUntilIdle(context.Background(), e)
		require.NoError(t, err)
		clock.Advance(time.Minute)
		_, err = corotasktest.RunUntilIdle(context.Background(), e)
		require.NoError(t, err)
		require.Equal(t, []executor.WakeReasons{executor.WokeFirst, executor.WokeChild}, parent.all(), "eager %v", eager)
		require.Equal(t, []executor.WakeReasons{executor.WokeFirst | executor.WokeMessage, executor.WokeTimer}, child.all(), "eager %v", eager)
	}
}

func TestWakeReasonsString(t *testing.T) {
	t.Parallel()
	require.Equal(t, "none", executor.WakeReasons(0).String())
	require.Equal(t, "first+message+child+timer+retry+operator+yield", executor.WakeReasons(127).String())
	require.Equal(t, "child+unknown", (executor.WokeChild | 1<<12).String())
}
