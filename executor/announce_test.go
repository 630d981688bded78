package executor_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// Every way a task becomes ready announces its type on corotask_ready, once
// its transaction commits, and ways that leave it waiting announce nothing:
// creation, a message, send_to_key, a yield, a message that arrived during
// the poll, children created ready, a completion that wakes an awaiting
// parent, a release, a failure with no backoff, a retry and a restart; and
// so are ready tasks whose rows an action held locked.
// Each step is checked by the next notification: one that a step should
// not have sent would arrive in place of the next step's.
func TestEveryWayToReadyIsAnnounced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	db := testdb.Pool(t, url)
	next := testdb.Listen(t, url, "corotask_ready")
	expect := func(want, what string) {
		t.Helper()
		require.Equal(t, want, next(), what)
	}
	later := time.Now().Add(time.Hour)
	create := func(typ tasks.Type, wakeAt time.Time) tasks.ID {
		t.Helper()
		id, err := tasks.Create(ctx, db, tasks.Spec{Type: typ, WakeAt: wakeAt})
		require.NoError(t, err)
		return id
	}
	// pollOnce polls the ready tasks of typ with a poller of its own.
	pollOnce := func(typ tasks.Type, poll func(*executor.Task[any, string]) executor.Action) {
		t.Helper()
		e := executor.MustNew(db, fastConfig(t))
		executor.Register(e, typ, executor.PollerFunc[any, string](func(ctx context.Context, t *executor.Task[any, string]) (executor.Action, error) {
			return poll(t), nil
		}))
		n, err := e.PollOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n, "a task of %s polled", typ)
	}

	sleeper := create("sleeper", later)
	create("created", time.Time{})
	expect("created", "a task created ready (and not the one created sleeping)")
	require.NoError(t, inbox.Send(ctx, db, sleeper, tasks.ID{}, "wake up"))
	expect("sleeper", "a message to a sleeping task")
	_, err := inbox.SendToKey(ctx, db, "keyed", "k", "hello", nil)
	require.NoError(t, err)
	expect("keyed", "a task send_to_key created")

	create("yielder", time.Time{})
	expect("yielder", "created")
	pollOnce("yielder", func(*executor.Task[any, string]) executor.Action { return executor.Yield() })
	expect("yielder", "a yield")

	create("suspender", time.Time{})
	expect("suspender", "created")
	pollOnce("suspender", func(task *executor.Task[any, string]) executor.Action {
		// A message that arrives while the task is claimed announces
		// nothing; the commit that swaps it into the inbox does.
		require.NoError(t, inbox.Send(ctx, db, task.ID, tasks.ID{}, "during the poll"))
		return executor.Suspend()
	})
	expect("suspender", "a commit with a message that arrived during the poll")

	create("parent", time.Time{})
	expect("parent", "created")
	pollOnce("parent", func(task *executor.Task[any, string]) executor.Action {
		task.Spawn("kid", nil, nil) // not a type of this executor: created ready
		return executor.AwaitChildren()
	})
	expect("kid", "a child created ready")
	pollOnce("kid", func(*executor.Task[any, string]) executor.Action { return executor.Done() })
	expect("parent", "the completion of the last child of an awaiting parent")

	released := create("released", later)
	claim := testdb.Claim(t, db, released, 1)
	_, err = db.Exec(ctx, `SELECT corotask.release_claims(ARRAY[$1::uuid], ARRAY[$2::uuid], interval '0')`, released, claim)
	require.NoError(t, err)
	expect("released", "a claim released")

	// failPoll claims id and fails its poll with no backoff, for good when
	// maxFailures is 1.
	failPoll := func(id tasks.ID, maxFailures int) {
		t.Helper()
		claim := testdb.Claim(t, db, id, 1)
		_, err := db.Exec(ctx, `SELECT * FROM corotask.fail_poll($1, $2, 'boom', interval '0', $3, 'failed', NULL, 0::smallint, 1, 1)`,
			id, claim, maxFailures)
		require.NoError(t, err)
	}
	failPoll(create("failing", later), 0)
	expect("failing", "a failed poll with no backoff")

	retried := create("retried", later)
	require.NoError(t, tasks.Retry(ctx, db, retried))
	expect("retried", "a retry")

	restarted := create("restarted", later)
	failPoll(restarted, 1) // failed for good: it ends, and announces nothing
	require.NoError(t, tasks.Restart(ctx, db, restarted))
	expect("restarted", "a restart (and not the failure that ended it)")

	// Actions that lock a ready task without making it ready (a claim may
	// have skipped it meanwhile) announce it: an operator's action, a child
	// created under it.
	waiting := create("waiting", time.Time{})
	expect("waiting", "created")
	require.NoError(t, tasks.ResetFailures(ctx, db, waiting))
	expect("waiting", "an operator's action on a ready task")
	_, err = tasks.Create(ctx, db, tasks.Spec{Type: "late-child", Parent: waiting})
	require.NoError(t, err)
	expect("waiting", "a ready parent a child was created under")
	expect("late-child", "the child")

	create("last", time.Time{})
	expect("last", "nothing else was announced")
}
