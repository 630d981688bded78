package executor_test

// Bad input that looks like SQL or holds NUL characters: stored as data, or refused clearly.

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// sqlish are strings that would do harm if pasted into SQL.
var sqlish = []string{
	`x'); DROP TABLE corotask.tasks; --`,
	`Robert'); DELETE FROM corotask.tasks WHERE ('1' = '1`,
	`$1; SELECT pg_sleep(10)`,
	`"; TRUNCATE corotask.tasks CASCADE; --`,
	`' OR 1=1 --`,
	`%`,
	`\'; COPY corotask.tasks TO '/tmp/x'; --`,
}

type sqlState struct {
	Text string            `json:"text"`
	Seen []string          `json:"seen"`
	Map  map[string]string `json:"map"`
}

func TestSQLLookingInputIsStoredAsData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	var ids []tasks.ID
	for _, s := range sqlish {
		typ := tasks.Type(s)
		require.NoError(t, typ.Validate())
		id, err := tasks.Create(ctx, db, tasks.Spec{Type: typ, State: sqlState{Text: s, Map: map[string]string{s: s}}, Message: s})
		require.NoError(t, err)
		require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, map[string]string{s: s}))
		ids = append(ids, id)
	}
	for i, s := range sqlish {
		e := executor.MustNew(db, badConfig(t))
		executor.Register(e, tasks.Type(s), executor.PollerFunc[sqlState, json.RawMessage](func(ctx context.Context, t *executor.Task[sqlState, json.RawMessage]) (executor.Action, error) {
			for {
				m, ok := t.Inbox.Pop()
				if !ok {
					break
				}
				t.State.Seen = append(t.State.Seen, string(m.Body))
			}
			return executor.DoneWith(t.State), nil
		}))
		n, err := e.PollOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n, "exactly the task of type %q", s)

		task, err := tasks.Get(ctx, db, ids[i])
		require.NoError(t, err)
		require.Equal(t, tasks.StatusDone, task.Status)
		require.Equal(t, tasks.Type(s), task.Type)
		var got sqlState
		require.NoError(t, json.Unmarshal(task.Result, &got))
		require.Equal(t, s, got.Text)
		require.Equal(t, map[string]string{s: s}, got.Map)
		first, _ := json.Marshal(s)
		second, _ := json.Marshal(map[string]string{s: s})
		require.Len(t, got.Seen, 2)
		require.JSONEq(t, string(first), got.Seen[0])
		require.JSONEq(t, string(second), got.Seen[1])

		byType, err := tasks.List(ctx, db, tasks.Filter{Type: tasks.Type(s)})
		require.NoError(t, err)
		require.Len(t, byType, 1, "a type is matched exactly, not as a pattern")
	}
	all, err := tasks.List(ctx, db, tasks.Filter{})
	require.NoError(t, err)
	require.Len(t, all, len(sqlish), "nothing was dropped or deleted")
	for _, s := range sqlish {
		_, err := tasks.ParseID(s)
		require.ErrorContains(t, err, "invalid task id")
	}
}

// PostgreSQL text and jsonb cannot hold NUL characters; Go strings can.
func TestNULCharacters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "nul"})
	require.NoError(t, err)
	// A message with a NUL is refused, clearly, and nothing is stored.
	err = inbox.Send(ctx, db, id, tasks.ID{}, "a\x00b")
	require.ErrorContains(t, err, "unsupported Unicode escape sequence")
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Zero(t, task.InboxLen)

	// A poll whose state or message has one fails like any refused commit.
	for _, what := range []string{"state", "message"} {
		typ := tasks.Type("nul." + what)
		e := executor.MustNew(db, badConfig(t))
		executor.Register(e, typ, executor.PollerFunc[string, string](func(ctx context.Context, t *executor.Task[string, string]) (executor.Action, error) {
			if what == "state" {
				t.State = "a\x00b"
			} else {
				t.Send(id, "a\x00b")
			}
			return executor.Yield(), nil
		}))
		sender, err := tasks.Create(ctx, db, tasks.Spec{Type: typ, State: "clean"})
		require.NoError(t, err)
		_, err = e.PollOnce(ctx)
		require.ErrorContains(t, err, "unsupported Unicode escape sequence", what)
		task := requireFailedOnce(t, db, sender, "unsupported Unicode escape sequence")
		require.JSONEq(t, `"clean"`, string(task.State))
	}

	// A poll that fails with an error text PostgreSQL cannot store (a NUL,
	// invalid UTF-8) is still recorded as failed, its claim released: the
	// text is made storable.
	e := executor.MustNew(db, badConfig(t))
	executor.Register(e, "nul.error", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.Action{}, errors.New("bad \x00 byte \xff here")
	}))
	failing, err := tasks.Create(ctx, db, tasks.Spec{Type: "nul.error"})
	require.NoError(t, err)
	_, err = e.PollOnce(ctx)
	require.ErrorContains(t, err, "bad")
	task = requireFailedOnce(t, db, failing, "bad ")
	require.Contains(t, task.LastError, "here")
}
