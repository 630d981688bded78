package executor_test

// Bad input: messages and states that do not decode, pollers that return
// nonsense, oversized or undeliverable messages, and types nobody polls (SQL-
// looking text: sqltext_test.go). Each must fail clearly, lose nothing and
// commit nothing of the failed poll.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/envelope"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// badConfig backs off for an hour after a failure, so that a failed task
// stays put for the test to look at.
func badConfig(t testing.TB) executor.Config {
	return executor.Config{Concurrency: 8, BackoffMin: time.Hour, BackoffMax: time.Hour, Logger: logger(t)}
}

// requireFailedOnce checks that the task's last poll failed, with an error
// containing want, and that nothing of it was kept.
func requireFailedOnce(t *testing.T, db tasks.DB, id tasks.ID, want string) *tasks.Task {
	t.Helper()
	task, err := tasks.Get(context.Background(), db, id)
	require.NoError(t, err)
	require.Equal(t, 1, task.Failures)
	require.Contains(t, task.LastError, want)
	require.Equal(t, tasks.StatusRetrying, task.Status, "backed off, claim released")
	require.True(t, task.Heartbeat.IsZero())
	return task
}

type stateV1 struct{ Count int }

type stateV2 struct{ Count string }

func TestStateThatNoLongerDecodesAfterATypeChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	v1 := executor.MustNew(db, badConfig(t))
	executor.Register(v1, "job", executor.PollerFunc[stateV1, string](func(ctx context.Context, t *executor.Task[stateV1, string]) (executor.Action, error) {
		t.State.Count++
		return executor.Suspend(), nil
	}))
	parent, err := tasks.Create(ctx, db, tasks.Spec{Type: "parent", WakeAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job", Parent: parent})
	require.NoError(t, err)
	_, err = v1.PollOnce(ctx)
	require.NoError(t, err)

	// The poller is redeployed with an incompatible state type.
	v2 := executor.MustNew(db, badConfig(t))
	var polls atomic.Int32
	executor.Register(v2, "job", executor.PollerFunc[stateV2, string](func(ctx context.Context, t *executor.Task[stateV2, string]) (executor.Action, error) {
		polls.Add(1)
		return executor.Done(), nil
	}), executor.MaxFailures(2))
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, "wake up"))
	n, err := v2.PollOnce(ctx)
	require.Equal(t, 1, n)
	require.ErrorContains(t, err, "state does not decode into executor_test.stateV2")
	require.Zero(t, polls.Load())
	task := requireFailedOnce(t, db, id, "state does not decode")
	require.JSONEq(t, `{"Count":1}`, string(task.State), "the stored state is kept as it was")
	require.Equal(t, 1, task.InboxLen, "and so is the message")

	// It keeps failing; past MaxFailures the task fails and its parent is told why.
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET wake_at = now() WHERE task_id = $1`, id)
	require.NoError(t, err)
	_, err = v2.PollOnce(ctx)
	require.ErrorContains(t, err, "state does not decode")
	task, err = tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusFailed, task.Status)
	p, err := tasks.Get(ctx, db, parent)
	require.NoError(t, err)
	require.Len(t, p.Inbox, 1)
	var env envelope.Envelope
	require.NoError(t, json.Unmarshal(p.Inbox[0], &env))
	require.True(t, env.Done)
	require.Equal(t, id, env.From)
	require.Contains(t, env.Err, "state does not decode")
}

func TestPollerReturnsNoValidAction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	_, err := db.Exec(ctx, `CREATE TABLE public.side_effects (n int)`)
	require.NoError(t, err)
	other, err := tasks.Create(ctx, db, tasks.Spec{Type: "other", WakeAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)

	cases := map[string]func(t *executor.Task[int, string]) executor.Action{
		"zero action": func(*executor.Task[int, string]) executor.Action { return executor.Action{} },
		"unencodable result": func(*executor.Task[int, string]) executor.Action {
			return executor.DoneWith(func() {})
		},
		"done with children": func(t *executor.Task[int, string]) executor.Action {
			t.Spawn("kid", nil, nil)
			return executor.Done()
		},
		"invalid spawn type": func(t *executor.Task[int, string]) executor.Action {
			t.Spawn(" bad type", nil, nil)
			return executor.Yield()
		},
		"send to no task": func(t *executor.Task[int, string]) executor.Action {
			t.Send(tasks.ID{}, "hello")
			return executor.Yield()
		},
		"unencodable message": func(t *executor.Task[int, string]) executor.Action {
			t.Send(other, make(chan int))
			return executor.Yield()
		},
	}
	wants := map[string]string{
		"zero action":         "poller returned no action",
		"unencodable result":  "encode result",
		"done with children":  "cannot spawn children",
		"invalid spawn type":  "invalid task type",
		"send to no task":     "no recipient",
		"unencodable message": "unsupported type",
	}
	for name, act := range cases {
		typ := tasks.Type("bad." + strings.ReplaceAll(name, " ", "-"))
		e := executor.MustNew(db, badConfig(t))
		executor.Register(e, typ, executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
			t.State = 99
			t.Inbox.Pop()
			t.Send(other, "must not arrive")
			t.OnCommit(func(ctx context.Context, tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `INSERT INTO public.side_effects VALUES (1)`)
				return err
			})
			return act(t), nil
		}))
		id, err := tasks.Create(ctx, db, tasks.Spec{Type: typ, State: 1, Message: "keep me"})
		require.NoError(t, err)
		n, err := e.PollOnce(ctx)
		require.Equal(t, 1, n, name)
		require.ErrorContains(t, err, wants[name], name)
		task := requireFailedOnce(t, db, id, wants[name])
		require.JSONEq(t, "1", string(task.State), name)
		require.Equal(t, 1, task.InboxLen, name)
	}
	o, err := tasks.Get(ctx, db, other)
	require.NoError(t, err)
	require.Zero(t, o.InboxLen, "no message of a failed poll was sent")
	kids, err := tasks.List(ctx, db, tasks.Filter{Type: "kid"})
	require.NoError(t, err)
	require.Empty(t, kids)
	var n int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM public.side_effects`).Scan(&n))
	require.Zero(t, n, "no OnCommit of a failed poll ran")
}

// incompressible returns about n bytes of text that jsonb cannot shrink.
func incompressible(n int) string {
	// The hex digits of i*2654435761, 8 for each i: written by hand, as
	// fmt would take seconds for the megabytes under -race.
	const digits = "0123456789abcdef"
	b := make([]byte, (n+7)/8*8)
	for i := 0; i < len(b)/8; i++ {
		v := uint32(i) * 2654435761
		for j := 7; j >= 0; j-- {
			b[8*i+j] = digits[v&15]
			v >>= 4
		}
	}
	return string(b[:n])
}

func TestOversizedMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "sink", WakeAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)

	// From outside: refused, with the size and the limit, and nothing stored.
	err = inbox.Send(ctx, db, id, tasks.ID{}, incompressible(tasks.MaxMessageBytes+1))
	require.ErrorIs(t, err, tasks.ErrTooLarge)
	require.ErrorContains(t, err, fmt.Sprintf("limit %d", tasks.MaxMessageBytes))
	// The limit is on the stored (jsonb) size: a string a little shorter is taken.
	fits := incompressible(tasks.MaxMessageBytes - 64)
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, fits))
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, 1, task.InboxLen)

	// From a poll: the poll fails with ErrTooLarge and nothing of it is kept,
	// not even its other effects.
	_, err = db.Exec(ctx, `CREATE TABLE public.side_effects (n int)`)
	require.NoError(t, err)
	other, err := tasks.Create(ctx, db, tasks.Spec{Type: "other", WakeAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	for _, how := range []string{"send", "spawn"} {
		typ := tasks.Type("big." + how)
		e := executor.MustNew(db, badConfig(t))
		executor.Register(e, typ, executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
			t.State = 99
			t.Inbox.Pop()
			t.Send(other, "small")
			t.Spawn("kid", nil, "small")
			t.OnCommit(func(ctx context.Context, tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `INSERT INTO public.side_effects VALUES (1)`)
				return err
			})
			if how == "send" {
				t.Send(id, incompressible(2*tasks.MaxMessageBytes))
			} else {
				t.Spawn("kid", nil, incompressible(2*tasks.MaxMessageBytes))
			}
			return executor.Yield(), nil
		}))
		sender, err := tasks.Create(ctx, db, tasks.Spec{Type: typ, State: 1, Message: "keep me"})
		require.NoError(t, err)
		n, err := e.PollOnce(ctx)
		require.Equal(t, 1, n)
		require.ErrorIs(t, err, tasks.ErrTooLarge, how)
		task := requireFailedOnce(t, db, sender, "message too large")
		require.JSONEq(t, "1", string(task.State))
		require.Equal(t, 1, task.InboxLen)
	}
	task, err = tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, 1, task.InboxLen, "only the message that fits")
	o, err := tasks.Get(ctx, db, other)
	require.NoError(t, err)
	require.Zero(t, o.InboxLen)
	kids, err := tasks.List(ctx, db, tasks.Filter{Type: "kid"})
	require.NoError(t, err)
	require.Empty(t, kids)
	var n int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM public.side_effects`).Scan(&n))
	require.Zero(t, n)

	// The message that fits reaches a poll intact.
	e := executor.MustNew(db, badConfig(t))
	var got string
	executor.Register(e, "sink", executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
		m, _ := t.Inbox.Pop()
		got = m.Body
		return executor.Done(), nil
	}))
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET wake_at = now() WHERE task_id = $1`, id)
	require.NoError(t, err)
	_, err = e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, fits, got)
}

func TestMessageToEndedOrUnknownTaskFailsThePoll(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	ended, err := tasks.Create(ctx, db, tasks.Spec{Type: "gone"})
	require.NoError(t, err)
	require.NoError(t, tasks.Cancel(ctx, db, ended))
	for name, to := range map[string]tasks.ID{"ended": ended, "unknown": tasks.NewID()} {
		typ := tasks.Type("sender." + name)
		e := executor.MustNew(db, badConfig(t))
		executor.Register(e, typ, executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
			t.State = 99
			t.Send(to, "hello")
			return executor.Done(), nil
		}))
		id, err := tasks.Create(ctx, db, tasks.Spec{Type: typ, State: 1})
		require.NoError(t, err)
		_, err = e.PollOnce(ctx)
		want := map[string]error{"ended": tasks.ErrEnded, "unknown": tasks.ErrNotFound}[name]
		require.ErrorIs(t, err, want, name)
		requireFailedOnce(t, db, id, to.String())
	}
}

func TestTaskTypeNoExecutorRegistered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	db := testdb.Pool(t, url)
	orphan, err := tasks.Create(ctx, db, tasks.Spec{Type: "nobody.home", Message: "anyone?"})
	require.NoError(t, err)
	known, err := tasks.Create(ctx, db, tasks.Spec{Type: "known"})
	require.NoError(t, err)

	cfg := badConfig(t)
	cfg.PollInterval = 20 * time.Millisecond
	e := executor.MustNew(testdb.Pool(t, url), cfg)
	var polled atomic.Int32
	executor.Register(e, "known", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		if polled.Add(1) < 5 {
			return executor.Yield(), nil // a few rounds of claims
		}
		return executor.Done(), nil
	}))
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Run(runCtx) }()
	require.Eventually(t, func() bool {
		task, err := tasks.Get(ctx, db, known)
		require.NoError(t, err)
		return task.Status == tasks.StatusDone
	}, testdb.Patience, 10*time.Millisecond)
	stop()
	require.NoError(t, <-done)

	// The orphan waits, untouched, and listing shows it as unserved: no
	// executor serves its type.
	ready, err := tasks.List(ctx, db, tasks.Filter{Status: tasks.StatusUnserved})
	require.NoError(t, err)
	require.Len(t, ready, 1)
	require.Equal(t, orphan, ready[0].ID)
	require.Equal(t, tasks.Type("nobody.home"), ready[0].Type)
	require.Equal(t, tasks.StatusUnserved, ready[0].Status)
	require.Zero(t, ready[0].Failures)
	require.Empty(t, ready[0].LastError)
	require.True(t, ready[0].Heartbeat.IsZero())
	require.Equal(t, 1, ready[0].InboxLen)
	byType, err := tasks.List(ctx, db, tasks.Filter{Type: "nobody.home"})
	require.NoError(t, err)
	require.Len(t, byType, 1)

	// PollOnce does not take it either.
	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n)

	// Once a poller for it runs, it is polled with its message.
	late := executor.MustNew(testdb.Pool(t, url), badConfig(t))
	var got string
	executor.Register(late, "nobody.home", executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
		m, _ := t.Inbox.Pop()
		got = m.Body
		return executor.Done(), nil
	}))
	n, err = late.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, "anyone?", got)
}
