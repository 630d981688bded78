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
	"github.com/corotask/corotask/tasks"
)

// sum is a parent that spawns a child per number in its state, awaits them,
// and ends with the sum of their results; a child of a negative number
// fails, and a child of 0 sleeps an hour.
type sum struct {
	Numbers []int `json:"numbers"`
	Total   int   `json:"total"`
	Waiting int   `json:"waiting"`
}

var (
	sums  = executor.NewHandle[sum, int]("test.sum")
	items = executor.NewHandle[int, struct{}]("test.item")
)

func pollSum(ctx context.Context, t *executor.Task[sum, int]) (executor.Action, error) {
	if t.State.Waiting == 0 && len(t.State.Numbers) > 0 {
		for _, n := range t.State.Numbers {
			items.Spawn(t, n)
		}
		t.State.Waiting, t.State.Numbers = len(t.State.Numbers), nil
		return executor.AwaitChildren(), nil
	}
	for m, ok := t.Inbox.Pop(); ok; m, ok = t.Inbox.Pop() {
		if m.Err != "" {
			return executor.Action{}, errors.New("a child failed: " + m.Err)
		}
		t.State.Total += m.Body
		t.State.Waiting--
	}
	if t.State.Waiting > 0 {
		return executor.AwaitChildren(), nil
	}
	return executor.DoneWith(t.State.Total), nil
}

func pollItem(ctx context.Context, t *executor.Task[int, struct{}]) (executor.Action, error) {
	switch {
	case t.State < 0:
		return executor.Action{}, errors.New("negative")
	case t.State == 0:
		return executor.Sleep(time.Hour), nil
	}
	return executor.DoneWith(t.State), nil
}

func newSumExecutor(t *testing.T) (*executor.Executor, *pgxpool.Pool) {
	db := corotasktest.NewDB(t)
	e := executor.MustNew(db, executor.Config{Logger: corotasktest.Logger(t)})
	executor.Register(e, sums.Type(), executor.PollerFunc[sum, int](pollSum))
	executor.Register(e, items.Type(), executor.PollerFunc[int, struct{}](pollItem), executor.MaxFailures(1))
	return e, db
}

func TestRunUntilIdleRunsAWorkflowToItsEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, db := newSumExecutor(t)
	id, err := sums.Create(ctx, db, sum{Numbers: []int{1, 2, 3}})
	require.NoError(t, err)

	n, err := corotasktest.RunUntilIdle(ctx, e)
	require.NoError(t, err)
	require.Equal(t, 5, n, "the parent twice, each child once")
	require.Equal(t, 6, corotasktest.Result[int](t, db, id))
	require.Equal(t, sum{Total: 6}, corotasktest.State[sum](t, db, id))

	n, err = corotasktest.RunUntilIdle(ctx, e)
	require.NoError(t, err)
	require.Zero(t, n, "nothing left")
}

// A task that sleeps is not ready: the run stops where the workflow waits.
func TestRunUntilIdleStopsAtASleep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, db := newSumExecutor(t)
	id, err := sums.Create(ctx, db, sum{Numbers: []int{0, 5}})
	require.NoError(t, err)

	n, err := corotasktest.RunUntilIdle(ctx, e)
	require.NoError(t, err)
	require.Equal(t, 3, n, "the parent, then both children")
	require.Equal(t, sum{Waiting: 2}, corotasktest.State[sum](t, db, id), "the parent waits for the child that sleeps")
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.True(t, task.AwaitingChildren)
	require.Equal(t, 1, task.LiveChildren)
}

// A failed poll stops the run with its error; the next run goes on.
func TestRunUntilIdleStopsAtAFailedPoll(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, db := newSumExecutor(t)
	id, err := sums.Create(ctx, db, sum{Numbers: []int{-1}})
	require.NoError(t, err)

	n, err := corotasktest.RunUntilIdle(ctx, e)
	require.ErrorContains(t, err, "(test.item): negative")
	require.Equal(t, 2, n, "the parent, then the child")

	// The child failed for good (MaxFailures(1)); its parent hears of it,
	// and fails in turn, to retry after a backoff.
	n, err = corotasktest.RunUntilIdle(ctx, e)
	require.ErrorContains(t, err, "(test.sum): a child failed: negative")
	require.Equal(t, 1, n)
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusRetrying, task.Status)
}

// A workflow that never settles runs into the limit.
func TestRunUntilIdleLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := corotasktest.NewDB(t)
	e := executor.MustNew(db, executor.Config{Logger: corotasktest.Logger(t)})
	spin := executor.Register(e, "test.spin", executor.PollerFunc[int, struct{}](
		func(ctx context.Context, t *executor.Task[int, struct{}]) (executor.Action, error) {
			t.State++
			return executor.Yield(), nil
		}))
	id, err := spin.Create(ctx, db, 0)
	require.NoError(t, err)

	n, err := corotasktest.RunUntilIdle(ctx, e, corotasktest.MaxPolls(5))
	require.ErrorIs(t, err, corotasktest.ErrNotIdle)
	require.EqualError(t, err, "corotasktest: tasks still ready after 6 polls, more than MaxPolls(5): does a task yield, sleep 0 or send to itself for ever?")
	require.Equal(t, 6, n)
	require.Equal(t, 6, corotasktest.State[int](t, db, id))
}

// A workflow of exactly the limit's size is not past it.
func TestRunUntilIdleLimitIsInclusive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, db := newSumExecutor(t)
	_, err := sums.Create(ctx, db, sum{Numbers: []int{1, 2, 3}})
	require.NoError(t, err)
	n, err := corotasktest.RunUntilIdle(ctx, e, corotasktest.MaxPolls(5))
	require.NoError(t, err)
	require.Equal(t, 5, n)
}
