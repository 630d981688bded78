package executor_test

import (
	"context"
	"encoding/json"
	"errors"
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

// tally is the state of the pollers of these tests.
type tally struct {
	Sum    int    `json:"sum"`
	Secret string `json:"-"` // not stored: a poll never sees it
}

// adder pops every message, adds its body to the sum and sleeps a second
// per message popped.
var adder = executor.PollerFunc[tally, int](func(ctx context.Context, t *executor.Task[tally, int]) (executor.Action, error) {
	n := 0
	for {
		m, ok := t.Inbox.Pop()
		if !ok {
			break
		}
		t.State.Sum += m.Body
		n++
	}
	return executor.Sleep(time.Duration(n) * time.Second), nil
})

func TestTryPollStateMessagesAndAction(t *testing.T) {
	t.Parallel()
	res, err := executor.TryPoll(context.Background(), adder, executor.TryInput[tally, int]{
		State:    tally{Sum: 1, Secret: "kept in memory only"},
		Messages: []inbox.Message[int]{{Body: 2}, {Body: 3}},
	})
	require.NoError(t, err)
	require.Equal(t, executor.Sleep(2*time.Second), res.Action)
	require.Equal(t, tally{Sum: 6}, res.State, "the state is what the next poll would decode")
	require.JSONEq(t, `{"sum": 6}`, string(res.StateJSON))
	require.Equal(t, 2, res.Popped)
	require.Nil(t, res.Result)
	require.Empty(t, res.Spawns)
	require.Empty(t, res.Sends)
	require.Empty(t, res.OnCommit)
}

// The poll sees the task as the executor would hand it over: its state and
// messages decoded from JSON, its ID, type, parent and failures.
func TestTryPollSeesWhatAClaimWouldHandOver(t *testing.T) {
	t.Parallel()
	id, parent, from := tasks.NewID(), tasks.NewID(), tasks.NewID()
	sent := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	var seen *executor.Task[tally, int]
	var msgs []inbox.Message[int]
	p := executor.PollerFunc[tally, int](func(ctx context.Context, t *executor.Task[tally, int]) (executor.Action, error) {
		seen = t
		for {
			m, ok := t.Inbox.Pop()
			if !ok {
				break
			}
			msgs = append(msgs, m)
		}
		return executor.Suspend(), nil
	})
	_, err := executor.TryPoll(context.Background(), p, executor.TryInput[tally, int]{
		ID: id, Type: "try.seen", Parent: parent, Failures: 2,
		State: tally{Sum: 4, Secret: "x"},
		Messages: []inbox.Message[int]{
			{From: from, Body: 7, SentAt: sent},
			{From: from, Done: true, Err: "canceled"},
		},
	})
	require.NoError(t, err)
	require.Equal(t, id, seen.ID)
	require.Equal(t, tasks.Type("try.seen"), seen.Type)
	require.Equal(t, parent, seen.Parent)
	require.Equal(t, 2, seen.Failures)
	require.Equal(t, tally{Sum: 4}, seen.State, "a field that is not stored is not seen")
	require.False(t, seen.Inbox.More())
	require.Equal(t, []inbox.Message[int]{
		{From: from, Body: 7, SentAt: sent},
		{From: from, Done: true, Err: "canceled"},
	}, msgs)

	// A zero ID is a new one.
	_, err = executor.TryPoll(context.Background(), p, executor.TryInput[tally, int]{})
	require.NoError(t, err)
	require.False(t, seen.ID.IsZero())
}

// A message given as Raw that does not decode into M reaches the poll as a
// poison message.
func TestTryPollPoisonMessage(t *testing.T) {
	t.Parallel()
	var got inbox.Message[int]
	p := executor.PollerFunc[tally, int](func(ctx context.Context, t *executor.Task[tally, int]) (executor.Action, error) {
		got, _ = t.Inbox.Pop()
		return executor.Yield(), nil
	})
	res, err := executor.TryPoll(context.Background(), p, executor.TryInput[tally, int]{
		Messages: []inbox.Message[int]{{Raw: json.RawMessage(`"seven"`)}},
	})
	require.NoError(t, err)
	var de *inbox.DecodeError
	require.ErrorAs(t, got.DecodeErr, &de)
	require.JSONEq(t, `"seven"`, string(got.Raw))
	require.Equal(t, 1, res.Popped)
	require.Equal(t, executor.Yield(), res.Action)
}

func TestTryPollEffects(t *testing.T) {
	t.Parallel()
	to := tasks.NewID()
	var child tasks.ID
	p := executor.PollerFunc[tally, int](func(ctx context.Context, t *executor.Task[tally, int]) (executor.Action, error) {
		child = t.Spawn("try.child", tally{Sum: 1}, 5)
		t.Spawn("try.bare", nil, nil)
		t.SpawnKeyed("try.named", "charge", nil, nil)
		t.Send(to, map[string]int{"n": 1})
		t.Send(to, "two")
		t.OnCommit(func(ctx context.Context, tx pgx.Tx) error { return nil })
		t.OnCommit(func(ctx context.Context, tx pgx.Tx) error { return errors.New("refused") })
		return executor.AwaitChildren(), nil
	})
	res, err := executor.TryPoll(context.Background(), p, executor.TryInput[tally, int]{})
	require.NoError(t, err)
	require.Equal(t, executor.AwaitChildren(), res.Action)
	require.Len(t, res.Spawns, 3)
	require.Equal(t, child, res.Spawns[0].ID)
	require.Equal(t, tasks.Type("try.child"), res.Spawns[0].Type)
	require.JSONEq(t, `{"sum": 1}`, string(res.Spawns[0].State))
	require.JSONEq(t, `5`, string(res.Spawns[0].Message))
	require.Equal(t, executor.TrySpawn{ID: res.Spawns[1].ID, Type: "try.bare"}, res.Spawns[1])
	require.Equal(t, executor.TrySpawn{ID: res.Spawns[2].ID, Type: "try.named", Key: "charge"}, res.Spawns[2])
	require.Len(t, res.Sends, 2)
	require.Equal(t, to, res.Sends[0].To)
	require.JSONEq(t, `{"n": 1}`, string(res.Sends[0].Message))
	require.JSONEq(t, `"two"`, string(res.Sends[1].Message))
	require.Len(t, res.OnCommit, 2)
	require.EqualError(t, res.RunOnCommit(context.Background(), nil), "OnCommit function 2: refused")
}

// RunOnCommit runs the functions in the transaction it is given, and turns
// a panic into a *PanicError, as the commit does.
func TestTryPollRunOnCommit(t *testing.T) {
	t.Parallel()
	p := executor.PollerFunc[tally, int](func(ctx context.Context, t *executor.Task[tally, int]) (executor.Action, error) {
		t.OnCommit(func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `CREATE TEMPORARY TABLE try_on_commit (n int)`)
			return err
		})
		return executor.Done(), nil
	})
	res, err := executor.TryPoll(context.Background(), p, executor.TryInput[tally, int]{})
	require.NoError(t, err)
	tx := testdb.Tx(t)
	require.NoError(t, res.RunOnCommit(context.Background(), tx))
	var n int
	require.NoError(t, tx.QueryRow(context.Background(), `SELECT count(*) FROM try_on_commit`).Scan(&n))

	res.OnCommit = append(res.OnCommit, func(context.Context, pgx.Tx) error { panic("boom") })
	err = res.RunOnCommit(context.Background(), nil)
	var pe *executor.PanicError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "OnCommit", pe.Where)
}

func TestTryPollDoneWith(t *testing.T) {
	t.Parallel()
	p := executor.PollerFunc[tally, int](func(ctx context.Context, t *executor.Task[tally, int]) (executor.Action, error) {
		return executor.DoneWith(map[string]int{"sum": t.State.Sum}), nil
	})
	res, err := executor.TryPoll(context.Background(), p, executor.TryInput[tally, int]{State: tally{Sum: 3}})
	require.NoError(t, err)
	require.Equal(t, executor.DoneWith(map[string]int{"sum": 3}), res.Action)
	require.JSONEq(t, `{"sum": 3}`, string(res.Result))
}

// A poll that pops its whole window while more messages wait is committed
// as a Yield, whatever it returned; one that leaves some keeps its action.
func TestTryPollWindow(t *testing.T) {
	t.Parallel()
	done := executor.PollerFunc[tally, int](func(ctx context.Context, t *executor.Task[tally, int]) (executor.Action, error) {
		if !t.Inbox.More() {
			return executor.Action{}, errors.New("no more")
		}
		for _, ok := t.Inbox.Pop(); ok; _, ok = t.Inbox.Pop() {
		}
		return executor.DoneWith(1), nil
	})
	res, err := executor.TryPoll(context.Background(), done, executor.TryInput[tally, int]{
		Messages: []inbox.Message[int]{{Body: 1}}, More: true,
	})
	require.NoError(t, err)
	require.Equal(t, executor.Yield(), res.Action)
	require.Nil(t, res.Result)

	peek := executor.PollerFunc[tally, int](func(ctx context.Context, t *executor.Task[tally, int]) (executor.Action, error) {
		_, _ = t.Inbox.Peek()
		return executor.Suspend(), nil
	})
	res, err = executor.TryPoll(context.Background(), peek, executor.TryInput[tally, int]{
		Messages: []inbox.Message[int]{{Body: 1}}, More: true,
	})
	require.NoError(t, err)
	require.Equal(t, executor.Suspend(), res.Action)
	require.Zero(t, res.Popped)

	// A window holds one message at least.
	_, err = executor.TryPoll(context.Background(), peek, executor.TryInput[tally, int]{More: true})
	require.EqualError(t, err, "executor: TryPoll: More without Messages: a window holds one message at least")
}

// A failed poll returns the error the executor would record, and nothing
// else.
func TestTryPollFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	poll := func(f func(t *executor.Task[tally, int]) (executor.Action, error)) (executor.TryResult[tally], error) {
		return executor.TryPoll(ctx, executor.PollerFunc[tally, int](
			func(ctx context.Context, t *executor.Task[tally, int]) (executor.Action, error) { return f(t) },
		), executor.TryInput[tally, int]{State: tally{Sum: 1}})
	}

	res, err := poll(func(t *executor.Task[tally, int]) (executor.Action, error) {
		t.State.Sum = 99
		return executor.Yield(), errors.New("not today")
	})
	require.EqualError(t, err, "not today")
	require.Zero(t, res)

	_, err = poll(func(t *executor.Task[tally, int]) (executor.Action, error) { panic("oops") })
	var pe *executor.PanicError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "poller", pe.Where)
	require.Equal(t, "oops", pe.Value)

	_, err = poll(func(t *executor.Task[tally, int]) (executor.Action, error) { return executor.Action{}, nil })
	require.ErrorContains(t, err, "poller returned no action")

	_, err = poll(func(t *executor.Task[tally, int]) (executor.Action, error) {
		t.Spawn("try.child", nil, nil)
		return executor.Done(), nil
	})
	require.ErrorContains(t, err, "a poll that ends its task cannot spawn children")

	_, err = poll(func(t *executor.Task[tally, int]) (executor.Action, error) {
		t.Send(tasks.ID{}, 1)
		return executor.Yield(), nil
	})
	require.ErrorContains(t, err, "send: no recipient")

	_, err = executor.TryPoll[tally, int](ctx, nil, executor.TryInput[tally, int]{})
	require.EqualError(t, err, "executor: TryPoll: nil poller")
}

// flaky is a state whose JSON does not decode into it.
type flaky struct{ N int }

func (f flaky) MarshalJSON() ([]byte, error) { return json.Marshal(f.N) }

func (f *flaky) UnmarshalJSON(b []byte) error {
	if string(b) == "13" {
		return errors.New("unlucky")
	}
	return json.Unmarshal(b, &f.N)
}

// A state that does not decode fails the poll, as it would in the executor;
// a new state that does not decode is reported too: the next poll would fail.
func TestTryPollStateThatDoesNotDecode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	inc := executor.PollerFunc[flaky, int](func(ctx context.Context, t *executor.Task[flaky, int]) (executor.Action, error) {
		t.State.N++
		return executor.Yield(), nil
	})
	_, err := executor.TryPoll(ctx, inc, executor.TryInput[flaky, int]{State: flaky{N: 13}})
	require.ErrorContains(t, err, "state does not decode into executor_test.flaky: unlucky")

	_, err = executor.TryPoll(ctx, inc, executor.TryInput[flaky, int]{State: flaky{N: 12}})
	require.ErrorContains(t, err, "executor: TryPoll: the new state 13 does not decode into executor_test.flaky: unlucky")

	res, err := executor.TryPoll(ctx, inc, executor.TryInput[flaky, int]{State: flaky{N: 1}})
	require.NoError(t, err)
	require.Equal(t, flaky{N: 2}, res.State)
}

// What TryPoll reports is what an executor commits for the same task.
func TestTryPollMatchesTheCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, executor.Config{Logger: testdb.Logger(t)})
	executor.Register(e, "try.adder", adder)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "try.adder", State: tally{Sum: 1}, Message: 2})
	require.NoError(t, err)
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, 3))

	res, err := executor.TryPoll(ctx, adder, executor.TryInput[tally, int]{
		ID: id, Type: "try.adder", State: tally{Sum: 1},
		Messages: []inbox.Message[int]{{Body: 2}, {Body: 3}},
	})
	require.NoError(t, err)
	before := time.Now()
	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.JSONEq(t, string(res.StateJSON), string(task.State))
	require.Equal(t, tasks.StatusSleeping, task.Status)
	require.Zero(t, task.InboxLen)
	require.Equal(t, executor.Sleep(2*time.Second), res.Action)
	require.NotNil(t, task.WakeAt)
	require.False(t, task.WakeAt.Before(before.Truncate(time.Microsecond).Add(2*time.Second)), "sleeps 2s from its commit")
}

// A unit test of a poller tries one poll on a state and messages, and looks
// at what it would commit: no database, nothing committed.
func ExampleTryPoll() {
	res, err := executor.TryPoll(context.Background(), adder, executor.TryInput[tally, int]{
		State:    tally{Sum: 1},
		Messages: []inbox.Message[int]{{Body: 2}, {Body: 3}},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Action, res.State.Sum, res.Popped)
	// Output: sleep(2s) 6 2
}
