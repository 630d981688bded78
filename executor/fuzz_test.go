package executor_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

type fuzzState struct {
	Count int
	Names []string
}

type fuzzMsg struct{ N int }

// FuzzPollDecodesStateAndInbox stores arbitrary JSON as a task's state and as
// an inbox entry (as a user's SQL could), and polls it: the poll either
// commits, having taken the message (decoded, or delivered with its decode
// error), or fails because the state does not decode, leaving the state and
// the message as they were. It never panics, never drops the message unseen.
// Run with:
//
//	go test ./executor -run '^$' -fuzz FuzzPollDecodesStateAndInbox -fuzztime 1m
func FuzzPollDecodesStateAndInbox(f *testing.F) {
	for _, s := range [][2]string{
		{`{"Count":1,"Names":["a"]}`, `{"from":null,"body":{"N":2}}`},
		{`null`, `{"from":null,"body":null}`},
		{`{"Count":"one"}`, `{"from":null,"body":{"N":1}}`},
		{`{"Count":1e30}`, `{"from":null,"body":{"N":1}}`},
		{`[]`, `{"body":{"N":1}}`},
		{`{"Count":1}`, `{"from":null,"body":"two"}`},
		{`{"Count":1}`, `42`},
		{`{"Count":1}`, `{"from":"robert"}`},
		{`{"Count":1}`, `{"from":null,"body":{"N":1},"done":1}`},
		{`"text"`, `[]`},
		{`{"count":2,"COUNT":3}`, `{"body":{"n":4}}`},
	} {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	ctx := context.Background()
	db := testdb.New(f)
	cfg := badConfig(f)
	// The fuzz target may not log through f: its polls' failures are expected.
	cfg.Logger = slog.New(slog.DiscardHandler)
	e := executor.MustNew(db, cfg)
	executor.Register(e, "fuzz", executor.PollerFunc[fuzzState, fuzzMsg](func(ctx context.Context, t *executor.Task[fuzzState, fuzzMsg]) (executor.Action, error) {
		for {
			m, ok := t.Inbox.Pop()
			if !ok {
				break
			}
			if m.DecodeErr != nil {
				t.State.Names = append(t.State.Names, "poison")
				continue
			}
			t.State.Count += m.Body.N
		}
		return executor.Suspend(), nil
	}))
	f.Fuzz(func(t *testing.T, state, env []byte) {
		if !json.Valid(state) || !json.Valid(env) {
			return // jsonb columns hold only JSON
		}
		id := tasks.NewID()
		// The task and its one message, as written by hand: no sender
		// would store what the fuzzer makes.
		if _, err := db.Exec(ctx, `WITH task AS (
				INSERT INTO corotask.tasks (task_id, root_id, task_type, inner_state, msg_seq, inbox_len)
				VALUES ($1, $1, 'fuzz', $2::jsonb, 1, 1)
			)
			INSERT INTO corotask.messages (task_id, root_id, seq, envelope) VALUES ($1, $1, 1, $3::jsonb)`,
			id, state, env); err != nil {
			return // JSON that jsonb refuses (\u0000, huge numbers)
		}
		defer db.Exec(ctx, `WITH m AS (DELETE FROM corotask.messages WHERE task_id = $1)
			DELETE FROM corotask.tasks WHERE task_id = $1`, id) //nolint:errcheck

		n, err := e.PollOnce(ctx)
		require.Equal(t, 1, n)
		task, gerr := tasks.Get(ctx, db, id)
		require.NoError(t, gerr)
		if err == nil {
			require.Equal(t, tasks.StatusSuspended, task.Status)
			require.Zero(t, task.InboxLen, "the message was taken")
			require.Zero(t, task.Failures)
			return
		}
		require.ErrorContains(t, err, "state does not decode")
		require.Equal(t, 1, task.Failures)
		require.Contains(t, task.LastError, "state does not decode")
		require.Equal(t, 1, task.InboxLen, "the message is kept")
		var same bool
		require.NoError(t, db.QueryRow(ctx, `SELECT t.inner_state IS NOT DISTINCT FROM $2::jsonb
				AND (SELECT m.envelope FROM corotask.messages m WHERE m.task_id = t.task_id ORDER BY m.seq LIMIT 1) = $3::jsonb
			FROM corotask.tasks t WHERE t.task_id = $1`, id, state, env).Scan(&same))
		require.True(t, same, "state and message are unchanged")
	})
}
