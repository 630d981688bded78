package executor_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// awaitFixture is a parent type ("gather") that spawns its children and
// awaits them, and a child type ("step") that waits for a message: "done"
// ends it with 1, "fail" fails its poll. Parents and children run on
// executors of their own, driven by PollOnce, so that each test decides
// when each child ends.
type awaitFixture struct {
	db       *pgxpool.Pool
	parents  *executor.Executor
	children *executor.Executor

	mu      sync.Mutex
	spawns  int        // how many children the first poll spawns
	spawned []tasks.ID // the children it spawned
	polls   [][]string // per parent poll after the first: what it popped
}

func newAwaitFixture(t *testing.T, children int) *awaitFixture {
	t.Helper()
	f := &awaitFixture{db: testdb.New(t), spawns: children}
	f.parents = executor.MustNew(f.db, fastConfig(t))
	f.children = executor.MustNew(f.db, fastConfig(t))
	executor.Register(f.parents, "gather", executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if t.State == 0 {
			t.State = 1
			for range f.spawns {
				f.spawned = append(f.spawned, t.Spawn("step", nil, nil))
			}
			return executor.AwaitChildren(), nil
		}
		var popped []string
		for {
			m, ok := t.Inbox.Pop()
			if !ok {
				break
			}
			switch {
			case !m.Done:
				popped = append(popped, "message "+m.Body)
			case m.Err != "":
				popped = append(popped, "ended: "+m.Err)
			default:
				popped = append(popped, "done")
			}
		}
		f.polls = append(f.polls, popped)
		switch {
		case slices.Contains(popped, "message finish"):
			return executor.Done(), nil
		case slices.Contains(popped, "message boom"):
			return executor.Action{}, errors.New("gather failed")
		}
		return executor.AwaitChildren(), nil
	}), executor.MaxFailures(1))
	executor.Register(f.children, "step", executor.PollerFunc[any, string](func(ctx context.Context, t *executor.Task[any, string]) (executor.Action, error) {
		m, ok := t.Inbox.Pop()
		switch {
		case !ok:
			return executor.Suspend(), nil
		case m.Body == "fail":
			return executor.Action{}, errors.New("step failed")
		}
		return executor.DoneWith(1), nil
	}), executor.MaxFailures(1))
	return f
}

func (f *awaitFixture) pollParents(t *testing.T) int {
	t.Helper()
	n, err := f.parents.PollOnce(context.Background())
	require.NoError(t, err)
	return n
}

func (f *awaitFixture) pollChildren(t *testing.T) int {
	t.Helper()
	n, err := f.children.PollOnce(context.Background())
	require.NoError(t, err)
	return n
}

// end has child i receive msg ("done" or "fail") and polls it.
func (f *awaitFixture) end(t *testing.T, i int, msg string) {
	t.Helper()
	require.NoError(t, inbox.Send(context.Background(), f.db, f.spawned[i], tasks.ID{}, msg))
	n, err := f.children.PollOnce(context.Background())
	if msg == "fail" {
		require.ErrorContains(t, err, "step failed") // PollOnce returns the poll's error
	} else {
		require.NoError(t, err)
	}
	require.Equal(t, 1, n)
}

func (f *awaitFixture) status(t *testing.T, id tasks.ID) tasks.Status {
	t.Helper()
	task, err := tasks.Get(context.Background(), f.db, id)
	require.NoError(t, err)
	return task.Status
}

// start creates the parent and has it spawn its children, which are
// polled once (they wait for their message).
func (f *awaitFixture) start(t *testing.T) tasks.ID {
	t.Helper()
	ctx := context.Background()
	parent, err := tasks.Create(ctx, f.db, tasks.Spec{Type: "gather"})
	require.NoError(t, err)
	require.Equal(t, 1, f.pollParents(t))
	require.Equal(t, len(f.spawned), f.pollChildren(t))
	return parent
}

// A parent that awaits its children is not woken by each completion, only
// by the last, and then sees them all in one poll.
func TestAwaitChildrenWakesOnTheLastCompletion(t *testing.T) {
	t.Parallel()
	f := newAwaitFixture(t, 3)
	parent := f.start(t)
	for i := range 2 {
		f.end(t, i, "done")
		require.Equal(t, tasks.StatusSuspended, f.status(t, parent), "after child %d of 3", i+1)
		require.Zero(t, f.pollParents(t), "a completion that is not the last does not wake the parent")
	}
	f.end(t, 2, "done")
	require.Equal(t, tasks.StatusReady, f.status(t, parent))
	require.Equal(t, 1, f.pollParents(t))
	require.Equal(t, [][]string{{"done", "done", "done"}}, f.polls)
	// With none left, awaiting again is polled again at once.
	require.Equal(t, tasks.StatusReady, f.status(t, parent))
}

// Any message other than a completion wakes a parent that awaits its
// children; awaiting again then waits for the children still running.
func TestAwaitChildrenIsWokenByAMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newAwaitFixture(t, 2)
	parent := f.start(t)
	f.end(t, 0, "done")
	require.Zero(t, f.pollParents(t))
	require.NoError(t, inbox.Send(ctx, f.db, parent, tasks.ID{}, "hello"))
	require.Equal(t, 1, f.pollParents(t))
	require.Equal(t, [][]string{{"done", "message hello"}}, f.polls)
	require.Equal(t, tasks.StatusSuspended, f.status(t, parent), "one child is still running")
	require.Zero(t, f.pollParents(t))

	f.end(t, 1, "done")
	require.NoError(t, inbox.Send(ctx, f.db, parent, tasks.ID{}, "finish"))
	require.Equal(t, 1, f.pollParents(t))
	require.Equal(t, []string{"done", "message finish"}, f.polls[1])
	require.Equal(t, tasks.StatusDone, f.status(t, parent))
}

// A task with no live child that awaits its children is polled again at
// once, as with Yield.
func TestAwaitChildrenWithoutChildren(t *testing.T) {
	t.Parallel()
	f := newAwaitFixture(t, 0)
	parent := f.start(t)
	require.Equal(t, tasks.StatusReady, f.status(t, parent))
	require.Equal(t, 1, f.pollParents(t))
	require.Equal(t, [][]string{nil}, f.polls)
}

// Every way a child ends counts (done, failed for good, canceled), and so
// does a child created from outside the parent's polls; a child that ends
// without a result wakes the parent at once.
func TestAwaitChildrenCountsEveryChildAndEveryEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newAwaitFixture(t, 2)
	parent := f.start(t)
	outside, err := tasks.Create(ctx, f.db, tasks.Spec{Type: "step", Parent: parent})
	require.NoError(t, err)
	require.Equal(t, 1, f.pollChildren(t)) // it waits for its message

	// A child that ends without a result wakes the parent at once.
	require.NoError(t, tasks.Cancel(ctx, f.db, f.spawned[0]))
	require.Equal(t, 1, f.pollParents(t))
	f.end(t, 1, "fail") // MaxFailures(1): it fails for good
	require.Equal(t, tasks.StatusFailed, f.status(t, f.spawned[1]))
	require.Equal(t, 1, f.pollParents(t))
	require.Equal(t, tasks.StatusSuspended, f.status(t, parent), "the child created from outside is still running")

	require.NoError(t, inbox.Send(ctx, f.db, outside, tasks.ID{}, "done"))
	require.Equal(t, 1, f.pollChildren(t))
	require.Equal(t, 1, f.pollParents(t))
	require.Equal(t, [][]string{{"ended: canceled"}, {"ended: step failed"}, {"done"}}, f.polls)
}

// Restarting a failed child makes it live again for its parent: the parent
// waits for its new end.
func TestAwaitChildrenCountsARestartedChild(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newAwaitFixture(t, 2)
	parent := f.start(t)
	f.end(t, 0, "fail")
	require.Equal(t, 1, f.pollParents(t), "a failed child wakes its parent")
	require.NoError(t, tasks.Restart(ctx, f.db, f.spawned[0]))
	_, err := tasks.DropMessage(ctx, f.db, f.spawned[0], 1, testdb.InboxDigest(t, f.db, f.spawned[0], 1)) // its "fail"
	require.NoError(t, err)
	require.Equal(t, 1, f.pollChildren(t)) // it waits for its message again
	f.end(t, 1, "done")
	require.Equal(t, tasks.StatusSuspended, f.status(t, parent))
	require.Zero(t, f.pollParents(t), "the restarted child is live again")
	f.end(t, 0, "done")
	require.Equal(t, 1, f.pollParents(t))
	require.Equal(t, [][]string{{"ended: step failed"}, {"done", "done"}}, f.polls)
}

// A parent restarted after it failed for good counts its children anew:
// those that ended meanwhile (their completions had nobody to go to) are not
// awaited.
func TestAwaitChildrenOfARestartedParent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newAwaitFixture(t, 2)
	parent := f.start(t)
	require.NoError(t, inbox.Send(ctx, f.db, parent, tasks.ID{}, "boom"))
	n, err := f.parents.PollOnce(ctx)
	require.ErrorContains(t, err, "gather failed")
	require.Equal(t, 1, n)
	require.Equal(t, tasks.StatusFailed, f.status(t, parent))
	f.end(t, 0, "done") // told nobody: its parent has ended

	require.NoError(t, tasks.Restart(ctx, f.db, parent))
	_, err = tasks.DropMessage(ctx, f.db, parent, 1, testdb.InboxDigest(t, f.db, parent, 1)) // its "boom"
	require.NoError(t, err)
	task, err := tasks.Get(ctx, f.db, parent)
	require.NoError(t, err)
	require.Equal(t, 1, task.LiveChildren)
	require.Equal(t, 1, f.pollParents(t))
	require.Equal(t, tasks.StatusSuspended, f.status(t, parent), "it awaits the child still running")
	f.end(t, 1, "done")
	require.Equal(t, 1, f.pollParents(t))
	require.Equal(t, [][]string{{"message boom"}, nil, {"done"}}, f.polls)
}
