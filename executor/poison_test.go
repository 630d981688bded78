package executor_test

// Poison messages: a message that does not decode into the poller's M is
// delivered in its place with its decode error and raw JSON, so that the
// poll runs and can drop it; the task is never wedged by it.

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

type order struct{ N int }

func TestPoisonMessageIsDeliveredInOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, badConfig(t))
	var seen []inbox.Message[order]
	executor.Register(e, "orders", executor.PollerFunc[int, order](func(ctx context.Context, t *executor.Task[int, order]) (executor.Action, error) {
		for {
			m, ok := t.Inbox.Pop()
			if !ok {
				break
			}
			seen = append(seen, m)
			if m.DecodeErr == nil {
				t.State += m.Body.N
			}
		}
		return executor.Suspend(), nil
	}), executor.MaxFailures(1))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "orders", Message: order{N: 1}})
	require.NoError(t, err)
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, "not an order"))
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, order{N: 2}))
	// An envelope written by hand in SQL that is not one, last.
	testdb.AppendRaw(t, db, id, "42")

	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Len(t, seen, 4)
	require.False(t, seen[0].SentAt.IsZero(), "stamped when sent")
	seen[0].SentAt, seen[2].SentAt = time.Time{}, time.Time{}
	require.Equal(t, inbox.Message[order]{Body: order{N: 1}}, seen[0])
	require.Equal(t, inbox.Message[order]{Body: order{N: 2}}, seen[2])

	bad := seen[1]
	require.Zero(t, bad.Body)
	require.JSONEq(t, `"not an order"`, string(bad.Raw))
	var de *inbox.DecodeError
	require.ErrorAs(t, bad.DecodeErr, &de)
	require.Equal(t, id, de.Task)
	require.Equal(t, 1, de.Position)
	require.ErrorContains(t, bad.DecodeErr, "inbox message 1 does not decode")

	require.ErrorAs(t, seen[3].DecodeErr, &de)
	require.Equal(t, 3, de.Position)
	require.JSONEq(t, `42`, string(seen[3].Raw), "the whole entry, when the envelope is not one")

	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusSuspended, task.Status, "not wedged: last error %q", task.LastError)
	require.Zero(t, task.Failures)
	require.Zero(t, task.InboxLen, "the poison messages were popped and dropped")
	require.JSONEq(t, "3", string(task.State))

	// The task goes on receiving.
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, order{N: 4}))
	_, err = e.PollOnce(ctx)
	require.NoError(t, err)
	task, err = tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.JSONEq(t, "7", string(task.State))
}

// A poll may leave a poison message where it is: it stays, in order, for a
// later poll (or an operator: corotask show lists it).
func TestPoisonMessageLeftInTheInboxStays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, badConfig(t))
	executor.Register(e, "orders", executor.PollerFunc[int, order](func(ctx context.Context, t *executor.Task[int, order]) (executor.Action, error) {
		for {
			m, ok := t.Inbox.Peek()
			if !ok || m.DecodeErr != nil {
				break
			}
			t.Inbox.Pop()
			t.State += m.Body.N
		}
		return executor.Suspend(), nil
	}))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "orders", Message: order{N: 1}})
	require.NoError(t, err)
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, []int{1, 2}))
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, order{N: 2}))
	_, err = e.PollOnce(ctx)
	require.NoError(t, err)
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Zero(t, task.Failures)
	require.JSONEq(t, "1", string(task.State))
	require.Len(t, task.Inbox, 2)
	var kept map[string]any
	require.NoError(t, json.Unmarshal(task.Inbox[0], &kept))
	require.NotEmpty(t, kept["at"], "the time it was sent")
	delete(kept, "at")
	require.Equal(t, map[string]any{"from": nil, "body": []any{1.0, 2.0}}, kept)
}

// A child's result of the wrong type reaches its parent as a completion
// (Done set, From the child) whose body did not decode.
func TestChildResultOfTheWrongType(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, badConfig(t))
	var got []inbox.Message[int]
	var child tasks.ID
	executor.Register(e, "parent", executor.PollerFunc[bool, int](func(ctx context.Context, t *executor.Task[bool, int]) (executor.Action, error) {
		if !t.State {
			t.State = true
			child = t.Spawn("child", nil, nil)
			return executor.Suspend(), nil
		}
		for {
			m, ok := t.Inbox.Pop()
			if !ok {
				break
			}
			got = append(got, m)
		}
		return executor.Done(), nil
	}), executor.MaxFailures(1))
	executor.Register(e, "child", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.DoneWith(map[string]string{"status": "shipped"}), nil
	}))
	parent, err := tasks.Create(ctx, db, tasks.Spec{Type: "parent"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := e.PollOnce(ctx)
		require.NoError(t, err)
		task, err := tasks.Get(ctx, db, parent)
		require.NoError(t, err)
		return task.Status == tasks.StatusDone
	}, testdb.Patience, time.Millisecond)
	require.Len(t, got, 1)
	m := got[0]
	require.True(t, m.Done)
	require.Equal(t, child, m.From)
	require.Empty(t, m.Err, "the child did not fail")
	require.Error(t, m.DecodeErr)
	require.JSONEq(t, `{"status": "shipped"}`, string(m.Raw))
}
