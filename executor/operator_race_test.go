package executor_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// While an executor holds a task, actions that would race its poll are
// refused; the poll commits as if nothing happened.
func TestOperatorActionsRefuseARunningTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	started, release := registerHeldJob(e)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job", Message: "first"})
	require.NoError(t, err)
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, "second"))
	start(t, e)
	<-started
	for name, action := range map[string]func() error{
		"retry":   func() error { return tasks.Retry(ctx, db, id) },
		"reset":   func() error { return tasks.ResetFailures(ctx, db, id) },
		"restart": func() error { return tasks.Restart(ctx, db, id) },
		"drop": func() error {
			_, err := tasks.DropMessage(ctx, db, id, 1, testdb.InboxDigest(t, db, id, 1))
			return err
		},
	} {
		err := action()
		require.ErrorIs(t, err, tasks.ErrRunning, name)
		require.ErrorContains(t, err, "try again once its poll has ended", name)
	}
	close(release)
	task := waitStatus(t, db, id, tasks.StatusSuspended)
	require.JSONEq(t, `["first","second"]`, string(task.State), "the poll committed; no message lost")
	for _, r := range history(t, db, id) {
		require.NotEqual(t, tasks.OperatorAction, r.Outcome, "a refused action is not recorded")
	}
}

// Operator actions racing polls, again and again: every message is seen
// exactly once, and each action either applies or is refused.
func TestOperatorActionsRacingPolls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	var mu sync.Mutex
	seen := map[int]int{}
	executor.Register(e, "job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		mu.Lock()
		defer mu.Unlock()
		for {
			m, ok := t.Inbox.Pop()
			if !ok {
				break
			}
			seen[m.Body]++
		}
		return executor.Sleep(time.Millisecond), nil
	}))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	start(t, e)
	const n = 200
	var applied atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			default:
			}
			var err error
			if i%2 == 0 {
				err = tasks.Retry(ctx, db, id)
			} else {
				err = tasks.ResetFailures(ctx, db, id)
			}
			switch {
			case err == nil:
				applied.Add(1)
			case errors.Is(err, tasks.ErrRunning), errors.Is(err, tasks.ErrWrongStatus):
			default:
				t.Errorf("action: %v", err)
				return
			}
			mu.Lock()
			total := len(seen)
			mu.Unlock()
			if total == n {
				return
			}
		}
	}()
	for i := range n {
		require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, i))
	}
	<-done
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, n)
	for i := range n {
		require.Equal(t, 1, seen[i], "message %d", i)
	}
	t.Logf("%d actions applied", applied.Load())
}

// registerHeldJob registers type "job" on e: a poller that appends the
// bodies of the messages it pops to its state and suspends. Its first poll
// closes started, then waits for release to be closed.
func registerHeldJob(e *executor.Executor) (started, release chan struct{}) {
	started, release = make(chan struct{}), make(chan struct{})
	executor.Register(e, "job", executor.PollerFunc[[]string, string](func(ctx context.Context, t *executor.Task[[]string, string]) (executor.Action, error) {
		first := len(t.State) == 0
		for {
			m, ok := t.Inbox.Pop()
			if !ok {
				break
			}
			t.State = append(t.State, m.Body)
		}
		if first {
			close(started)
			<-release
		}
		return executor.Suspend(), nil
	}))
	return started, release
}
