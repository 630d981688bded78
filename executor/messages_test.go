package executor_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

func TestMessageSentDuringPollIsSeenByTheNextPoll(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	entered, proceed := make(chan struct{}), make(chan struct{})
	var seen []int
	executor.Register(e, "listener", executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
		t.State++
		seen = append(seen, t.Inbox.Len())
		if t.State == 1 {
			close(entered)
			<-proceed
			return executor.Suspend(), nil
		}
		if m, ok := t.Inbox.Pop(); !ok || m.Body != "during" {
			return executor.Action{}, fmt.Errorf("want the message sent during the first poll, got %+v", m)
		}
		return executor.Done(), nil
	}))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "listener"})
	require.NoError(t, err)

	polled := make(chan error)
	go func() { _, err := e.PollOnce(ctx); polled <- err }()
	<-entered
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, "during"))
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, 0, task.InboxLen)
	require.Equal(t, 1, task.InboxNextLen)
	close(proceed)
	require.NoError(t, <-polled)

	// The poll suspended, but the message that arrived meanwhile makes the
	// task ready at once, with the message moved into its inbox.
	task, err = tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusReady, task.Status)
	require.Equal(t, 1, task.InboxLen)
	require.Equal(t, 0, task.InboxNextLen)

	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []int{0, 1}, seen)
	task, err = tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusDone, task.Status)
	require.Equal(t, 0, task.InboxLen)
}

// A poll that returns Done while messages arrived for its task does not end
// it: the poll's state and sends are committed, and the task is polled again
// with the new messages; it ends when a Done poll saw everything.
func TestDoneWithMessagesArrivedMeanwhilePollsAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	parent, err := tasks.Create(ctx, db, tasks.Spec{Type: "parent", WakeAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	other, err := tasks.Create(ctx, db, tasks.Spec{Type: "other", WakeAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job", Parent: parent, Message: "first"})
	require.NoError(t, err)

	e := executor.MustNew(db, fastConfig(t))
	entered, proceed := make(chan struct{}), make(chan struct{})
	var seen [][]string // the messages each poll saw
	var onCommits int
	executor.Register(e, "job", executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
		var got []string
		for {
			m, ok := t.Inbox.Pop()
			if !ok {
				break
			}
			got = append(got, m.Body)
		}
		seen = append(seen, got)
		t.State++
		t.Send(other, "hello")
		t.OnCommit(func(context.Context, pgx.Tx) error { onCommits++; return nil })
		if len(seen) == 1 {
			close(entered)
			<-proceed
		}
		return executor.DoneWith(t.State), nil
	}))
	polled := make(chan error, 1)
	go func() {
		_, err := e.PollOnce(context.Background())
		polled <- err
	}()
	<-entered
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, "during"))
	close(proceed)
	require.NoError(t, <-polled)

	// The Done poll is superseded: nothing of it is kept.
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusReady, task.Status, "not ended: a message arrived during the Done poll")
	require.Empty(t, task.State, "the state is as before the poll (none)")
	require.Equal(t, 2, task.InboxLen, "the popped message is back, followed by the new one")
	o, err := tasks.Get(ctx, db, other)
	require.NoError(t, err)
	require.Zero(t, o.InboxLen, "the poll's sends are dropped with it")
	require.Zero(t, onCommits, "and its OnCommit work")
	p, err := tasks.Get(ctx, db, parent)
	require.NoError(t, err)
	require.Zero(t, p.InboxLen, "the parent is not told")
	h, err := tasks.History(ctx, db, id, tasks.HistoryOptions{})
	require.NoError(t, err)
	require.Equal(t, tasks.Superseded, h[len(h)-1].Outcome)

	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, [][]string{{"first"}, {"first", "during"}}, seen)
	task, err = tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusDone, task.Status)
	require.JSONEq(t, "1", string(task.Result), "the state the superseded poll counted was not kept")
	o, err = tasks.Get(ctx, db, other)
	require.NoError(t, err)
	require.Equal(t, 1, o.InboxLen, "the ending poll's send, once")
	require.Equal(t, 1, onCommits)
	p, err = tasks.Get(ctx, db, parent)
	require.NoError(t, err)
	require.Equal(t, 1, p.InboxLen, "one completion")
}

// Messages carry the time they were sent, completions included.
func TestMessagesSayWhenTheyWereSent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	var sent []time.Time
	executor.Register(e, "parent", executor.PollerFunc[bool, string](func(ctx context.Context, t *executor.Task[bool, string]) (executor.Action, error) {
		if !t.State {
			t.State = true
			t.Spawn("kid", nil, nil)
		}
		for {
			m, ok := t.Inbox.Pop()
			if !ok {
				break
			}
			sent = append(sent, m.SentAt)
		}
		return executor.Suspend(), nil
	}))
	executor.Register(e, "kid", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.Done(), nil
	}))
	before := time.Now()
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "parent"})
	require.NoError(t, err)
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, "hello"))
	for range 3 {
		_, err = e.PollOnce(ctx)
		require.NoError(t, err)
	}
	require.Len(t, sent, 2, "the message, then the child's completion")
	for _, at := range sent {
		require.WithinDuration(t, before, at, time.Minute)
	}
	require.False(t, sent[1].Before(sent[0]))
}
