package executor_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/envelope"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// sends returns the entries of the task's history that record a message an
// operator sent.
func sends(h []tasks.HistoryEntry) []tasks.HistoryEntry {
	var out []tasks.HistoryEntry
	for _, e := range h {
		if e.Outcome == tasks.OperatorAction && e.Action == "send" {
			out = append(out, e)
		}
	}
	return out
}

// bodyOf returns the body of a message envelope.
func bodyOf(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var env envelope.Envelope
	require.NoError(t, json.Unmarshal(raw, &env))
	return string(env.Body)
}

// A message sent with SendAsOperator is delivered as with Send, and recorded
// in the task's history: one entry per message, in order, with the role that
// sent it and the envelope the inbox received. Send records nothing.
func TestSendAsOperatorIsRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job", WakeAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, "from a program"))
	require.Empty(t, history(t, db, id), "Send records nothing")

	require.NoError(t, inbox.SendAsOperator(ctx, db, id, tasks.ID{}, map[string]bool{"approve": true}))
	sender, err := tasks.Create(ctx, db, tasks.Spec{Type: "other"})
	require.NoError(t, err)
	require.NoError(t, inbox.SendAsOperator(ctx, db, id, sender, json.RawMessage(`"second"`)))

	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusReady, task.Status, "woken, as by Send")
	require.Len(t, task.Inbox, 3)
	h := history(t, db, id)
	require.Len(t, h, 2)
	for i, e := range h {
		require.Equal(t, tasks.OperatorAction, e.Outcome)
		require.Equal(t, "send", e.Action)
		require.Equal(t, sessionUser(t, db), e.Actor)
		require.Zero(t, e.Attempt, "sent before any poll")
		require.Equal(t, i+1, e.Seq)
		require.True(t, e.Executor.IsZero())
		require.Nil(t, e.ClaimedAt)
		require.Equal(t, string(task.Inbox[i+1]), string(e.Message), "the envelope the inbox received")
	}
	require.JSONEq(t, `{"approve": true}`, bodyOf(t, h[0].Message))
	require.Equal(t, `{"body":"second","from":"`+sender.UUID()+`"}`, testdb.WithoutSentAt(t, h[1].Message))

	last, err := tasks.History(ctx, db, id, tasks.HistoryOptions{Last: 1})
	require.NoError(t, err)
	require.Len(t, last, 1)
	require.Equal(t, 2, last[0].Seq, "Last counts entries")

	// Recorded after the attempt it came after, before the next.
	require.NoError(t, tasks.Cancel(ctx, db, sender))
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET wake_at = now() + interval '1 hour' WHERE task_id = $1`, id)
	require.NoError(t, err)
	require.NoError(t, tasks.Retry(ctx, db, id)) // attempt 1
	require.NoError(t, inbox.SendAsOperator(ctx, db, id, tasks.ID{}, "third"))
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, "not recorded"))
	require.NoError(t, inbox.SendAsOperator(ctx, db, id, tasks.ID{}, "fourth"))
	h = history(t, db, id)
	type key struct {
		Attempt, Seq int
		Action       string
	}
	var keys []key
	for _, e := range h {
		keys = append(keys, key{e.Attempt, e.Seq, e.Action})
	}
	require.Equal(t, []key{{0, 1, "send"}, {0, 2, "send"}, {1, 0, "retry"}, {1, 1, "send"}, {1, 2, "send"}}, keys)
	require.Equal(t, `"fourth"`, bodyOf(t, h[4].Message))
}

// Messages an operator sends at once to one task each get their own entry.
func TestSendAsOperatorConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job", WakeAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	const n = 20
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := inbox.SendAsOperator(ctx, db, id, tasks.ID{}, i); err != nil {
				t.Errorf("send %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Len(t, task.Inbox, n)
	h := history(t, db, id)
	require.Len(t, h, n)
	for i, e := range h {
		require.Equal(t, i+1, e.Seq)
		require.Equal(t, string(task.Inbox[i]), string(e.Message), "entries in the order the inbox received them")
	}
}

// A message an operator sends to a running task is delivered to inbox_next
// and recorded under the running attempt; the poll's commit still writes
// that attempt's own entry, and the next poll sees the message.
func TestSendAsOperatorToARunningTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	started, release := registerHeldJob(e)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job", Message: "first"})
	require.NoError(t, err)
	start(t, e)
	<-started
	require.NoError(t, inbox.SendAsOperator(ctx, db, id, tasks.ID{}, "during the poll"))
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusRunning, task.Status)
	require.Len(t, task.InboxNext, 1)
	require.Equal(t, 1, task.Attempts, "a send is no attempt")
	close(release)

	task = waitStatus(t, db, id, tasks.StatusSuspended)
	require.JSONEq(t, `["first","during the poll"]`, string(task.State), "the next poll saw it")
	h := history(t, db, id)
	require.Len(t, h, 3)
	require.Equal(t, []int{1, 1, 2}, attempts(h))
	require.Equal(t, tasks.Committed, h[0].Outcome, "the running poll committed, and recorded its attempt")
	require.Zero(t, h[0].Seq)
	require.Equal(t, 1, h[0].Popped)
	require.Equal(t, tasks.OperatorAction, h[1].Outcome)
	require.Equal(t, "send", h[1].Action)
	require.Equal(t, 1, h[1].Seq)
	require.Equal(t, `"during the poll"`, bodyOf(t, h[1].Message))
	require.Equal(t, tasks.Committed, h[2].Outcome)
	require.Equal(t, 1, h[2].Popped)
}

// A refused message (unknown or ended task, too large) is recorded nowhere,
// and changes nothing.
func TestRefusedSendAsOperatorRecordsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	count := func() int {
		t.Helper()
		var n int
		require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM corotask.history`).Scan(&n))
		return n
	}
	unknown := tasks.NewID()
	before := count()
	require.ErrorIs(t, inbox.SendAsOperator(ctx, db, unknown, tasks.ID{}, "x"), tasks.ErrNotFound)
	require.Equal(t, before, count())

	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	err = inbox.SendAsOperator(ctx, db, id, tasks.ID{}, strings.Repeat("x", tasks.MaxMessageBytes+1))
	require.ErrorIs(t, err, tasks.ErrTooLarge)
	require.Empty(t, history(t, db, id))

	require.NoError(t, tasks.Cancel(ctx, db, id))
	ended, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	h := history(t, db, id)
	require.ErrorIs(t, inbox.SendAsOperator(ctx, db, id, tasks.ID{}, "x"), tasks.ErrEnded)
	require.Equal(t, h, history(t, db, id))
	after, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, ended, after)
	require.ErrorContains(t, inbox.SendAsOperator(ctx, db, tasks.ID{}, tasks.ID{}, "x"), "no recipient")
}
