package inbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/dberr"
	"github.com/corotask/corotask/internal/envelope"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

func raw(t *testing.T, task *tasks.Task) [][]byte {
	t.Helper()
	out := make([][]byte, len(task.Inbox))
	for i, m := range task.Inbox {
		out[i] = m
	}
	return out
}

func TestSendToSuspendedTaskWakesIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "a"})
	require.NoError(t, err)
	_, err = db.Exec(ctx, "UPDATE corotask.tasks SET wake_at = NULL WHERE task_id = $1", id)
	require.NoError(t, err)
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusSuspended, task.Status)

	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, map[string]bool{"approve": true}))
	task, err = tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusReady, task.Status)
	require.NotNil(t, task.WakeAt)
	require.Equal(t, 1, task.InboxLen)
	in, err := newInbox[map[string]bool](id, raw(t, task))
	require.NoError(t, err)
	m, ok := in.Pop()
	require.True(t, ok)
	require.True(t, m.From.IsZero())
	require.Equal(t, map[string]bool{"approve": true}, m.Body)
	require.False(t, m.Done)
}

func TestSendToSleepingTaskMovesWakeAtToNow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "a", WakeAt: time.Now().Add(24 * time.Hour)})
	require.NoError(t, err)
	var before time.Time
	require.NoError(t, db.QueryRow(ctx, "SELECT now()").Scan(&before))
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, 1))
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusReady, task.Status)
	require.False(t, task.WakeAt.Before(before))
	require.WithinDuration(t, time.Now(), *task.WakeAt, time.Minute)

	// A task due earlier than now keeps its earlier wake_at.
	early := time.Now().Add(-time.Hour).Truncate(time.Microsecond)
	id2, err := tasks.Create(ctx, db, tasks.Spec{Type: "a", WakeAt: early})
	require.NoError(t, err)
	require.NoError(t, inbox.Send(ctx, db, id2, tasks.ID{}, 1))
	task, err = tasks.Get(ctx, db, id2)
	require.NoError(t, err)
	require.True(t, early.Equal(*task.WakeAt))
}

func TestSendToRunningTaskLandsInInboxNext(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "a"})
	require.NoError(t, err)
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, "before"))
	// Claim it the way an executor does.
	_, err = db.Exec(ctx, "UPDATE corotask.tasks SET heartbeat = now(), claim = gen_random_uuid() WHERE task_id = $1", id)
	require.NoError(t, err)
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, "during"))
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusRunning, task.Status)
	require.Equal(t, 1, task.InboxLen)
	require.Equal(t, 1, task.InboxNextLen)
	require.JSONEq(t, `{"from":null,"body":"before"}`, testdb.WithoutSentAt(t, task.Inbox[0]))
	require.JSONEq(t, `{"from":null,"body":"during"}`, testdb.WithoutSentAt(t, task.InboxNext[0]))
}

func TestSendToUnknownAndEndedTasksFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	unknown := tasks.NewID()
	err := inbox.Send(ctx, db, unknown, tasks.ID{}, 1)
	require.ErrorIs(t, err, tasks.ErrNotFound)
	require.ErrorContains(t, err, unknown.String())

	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "a"})
	require.NoError(t, err)
	require.NoError(t, tasks.Cancel(ctx, db, id))
	err = inbox.Send(ctx, db, id, tasks.ID{}, 1)
	require.ErrorIs(t, err, tasks.ErrEnded)
	require.ErrorContains(t, err, id.String())
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Zero(t, task.InboxLen)

	require.ErrorContains(t, inbox.Send(ctx, db, tasks.ID{}, tasks.ID{}, 1), "no recipient")
}

func TestSendKeepsOrderFromOneSender(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	from, err := tasks.Create(ctx, db, tasks.Spec{Type: "sender"})
	require.NoError(t, err)
	to, err := tasks.Create(ctx, db, tasks.Spec{Type: "receiver"})
	require.NoError(t, err)
	const n = 200
	for i := 0; i < n; i++ {
		if i == n/2 {
			// Half arrive while the receiver is being polled, half before.
			_, err = db.Exec(ctx, "UPDATE corotask.tasks SET heartbeat = now(), claim = gen_random_uuid() WHERE task_id = $1", to)
			require.NoError(t, err)
		}
		require.NoError(t, inbox.Send(ctx, db, to, from, i))
	}
	task, err := tasks.Get(ctx, db, to)
	require.NoError(t, err)
	all := append(append([]json.RawMessage{}, task.Inbox...), task.InboxNext...)
	require.Len(t, all, n)
	for i, m := range all {
		var env envelope.Envelope
		require.NoError(t, json.Unmarshal(m, &env))
		require.Equal(t, from, env.From)
		require.Equal(t, fmt.Sprint(i), string(env.Body))
	}
}

func TestSendTooLarge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "a"})
	require.NoError(t, err)
	// Random-looking text does not compress below the limit.
	var b strings.Builder
	for i := 0; b.Len() < 2*tasks.MaxMessageBytes; i++ {
		fmt.Fprintf(&b, "%x", i*2654435761)
	}
	err = inbox.Send(ctx, db, id, tasks.ID{}, b.String())
	require.ErrorIs(t, err, tasks.ErrTooLarge)
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Zero(t, task.InboxLen)
}

func TestSendToTaskFromTrigger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "orders"})
	require.NoError(t, err)
	_, err = db.Exec(ctx, `
		CREATE TABLE public.orders (order_id serial PRIMARY KEY, watcher uuid NOT NULL, total int NOT NULL);
		CREATE FUNCTION public.order_placed() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			PERFORM corotask.send_to_task(NEW.watcher, NULL, jsonb_build_object('order', NEW.order_id, 'total', NEW.total));
			RETURN NEW;
		END $$;
		CREATE TRIGGER order_placed AFTER INSERT ON public.orders FOR EACH ROW EXECUTE FUNCTION public.order_placed();
		CREATE FUNCTION public.order_spawn() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			PERFORM corotask.create_task(gen_random_uuid(), 'orders.audit', NEW.watcher, jsonb_build_object('order', NEW.order_id));
			RETURN NEW;
		END $$;
		CREATE TRIGGER order_spawn AFTER INSERT ON public.orders FOR EACH ROW EXECUTE FUNCTION public.order_spawn();`)
	require.NoError(t, err)
	_, err = db.Exec(ctx, "INSERT INTO public.orders (watcher, total) VALUES ($1, 42)", id)
	require.NoError(t, err)

	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Len(t, task.Inbox, 1)
	require.JSONEq(t, `{"from":null,"body":{"order":1,"total":42}}`, testdb.WithoutSentAt(t, task.Inbox[0]))
	kids, err := tasks.List(ctx, db, tasks.Filter{Parent: id})
	require.NoError(t, err)
	require.Len(t, kids, 1)
	require.Equal(t, tasks.Type("orders.audit"), kids[0].Type)

	// A trigger that sends to a task that does not exist fails the user's insert.
	_, err = db.Exec(ctx, "INSERT INTO public.orders (watcher, total) VALUES ($1, 1)", tasks.NewID())
	require.ErrorIs(t, dberr.Translate(err), tasks.ErrNotFound)
	var n int
	require.NoError(t, db.QueryRow(ctx, "SELECT count(*) FROM public.orders").Scan(&n))
	require.Equal(t, 1, n)
}

func TestInboxPeekPop(t *testing.T) {
	t.Parallel()
	from := tasks.NewID()
	in := inbox.Of(inbox.Message[int]{From: from, Body: 1}, inbox.Message[int]{Body: 2, Done: true, Err: "boom"})
	require.Equal(t, 2, in.Len())
	m, ok := in.Peek()
	require.True(t, ok)
	require.Equal(t, 1, m.Body)
	require.Equal(t, 2, in.Len(), "peek does not take")
	m, ok = in.Pop()
	require.True(t, ok)
	require.Equal(t, from, m.From)
	m, ok = in.Pop()
	require.True(t, ok)
	require.Equal(t, 2, m.Body)
	require.True(t, m.Done)
	require.Equal(t, "boom", m.Err)
	_, ok = in.Pop()
	require.False(t, ok)
	_, ok = in.Peek()
	require.False(t, ok)
	require.Equal(t, 0, in.Len())
}

// newInbox decodes stored messages as the executor does before a poll.
func newInbox[M any](task tasks.ID, raw [][]byte) (*inbox.Inbox[M], error) {
	return inbox.Of(envelope.Decode[M](task, raw)...), nil
}
