package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
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

// The grants docs/operations.md gives operators are enough to act on tasks
// and read their history, and acting needs them.
func TestOperatorRoleGrants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	admin := testdb.Pool(t, url)
	suffix := strings.ToLower(tasks.NewID().String()[16:])
	ops, fix := "ops_"+suffix, "ops_fix_"+suffix
	_, err := admin.Exec(ctx, `
		CREATE ROLE `+ops+` NOLOGIN;
		GRANT USAGE ON SCHEMA corotask TO `+ops+`;
		GRANT SELECT ON corotask.tasks, corotask.messages, corotask.history, corotask.executors TO `+ops+`;
		CREATE ROLE `+fix+` NOLOGIN;
		GRANT `+ops+` TO `+fix+`;
		GRANT EXECUTE ON FUNCTION corotask.retry_task(uuid), corotask.reset_failures(uuid),
			corotask.restart_task(uuid), corotask.drop_message(uuid, integer, text),
			corotask.operator_send(uuid, uuid, jsonb, jsonb), corotask.cancel_task(uuid) TO `+fix+`;`)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, r := range []string{fix, ops} {
			_, _ = admin.Exec(context.Background(), "DROP OWNED BY "+r+"; DROP ROLE "+r)
		}
	})
	id, err := tasks.Create(ctx, admin, tasks.Spec{Type: "job", WakeAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	require.NoError(t, inbox.Send(ctx, admin, id, tasks.ID{}, "x"))
	_, err = admin.Exec(ctx, `UPDATE corotask.tasks SET wake_at = now() + interval '1 hour' WHERE task_id = $1`, id)
	require.NoError(t, err)

	readOnly := poolAs(t, url, ops)
	_, err = tasks.Get(ctx, readOnly, id)
	require.NoError(t, err)
	_, err = tasks.History(ctx, readOnly, id, tasks.HistoryOptions{})
	require.NoError(t, err)
	_, err = tasks.Executors(ctx, readOnly)
	require.NoError(t, err)
	require.ErrorContains(t, tasks.Retry(ctx, readOnly, id), "permission denied")
	require.ErrorContains(t, inbox.SendAsOperator(ctx, readOnly, id, tasks.ID{}, "y"), "permission denied")

	fixer := poolAs(t, url, fix)
	require.NoError(t, tasks.Retry(ctx, fixer, id))
	require.NoError(t, tasks.ResetFailures(ctx, fixer, id))
	require.NoError(t, inbox.SendAsOperator(ctx, fixer, id, tasks.ID{}, "y"))
	require.Equal(t, "send", lastEntry(t, admin, id).Action)
	_, err = tasks.DropMessage(ctx, fixer, id, 1, testdb.InboxDigest(t, admin, id, 1))
	require.NoError(t, err)
	require.NoError(t, tasks.Cancel(ctx, fixer, id))
	require.ErrorIs(t, tasks.Restart(ctx, fixer, id), tasks.ErrWrongStatus, "canceled, not failed: refused, not denied")
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
