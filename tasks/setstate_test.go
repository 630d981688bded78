package tasks_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// SetState replaces a live task's state, raises its attempt number, leaves
// when it is polled alone, and records the action with both states.
func TestSetState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "t", State: map[string]any{"step": 3, "to": "a@example.com"}})
	require.NoError(t, err)
	before, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)

	require.NoError(t, tasks.SetState(ctx, db, id, json.RawMessage(` {"step": 4, "to": "b@example.com"} `)))
	after, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.JSONEq(t, `{"step": 4, "to": "b@example.com"}`, string(after.State))
	require.Equal(t, before.Attempts+1, after.Attempts)
	require.Equal(t, before.Status, after.Status)
	require.Equal(t, before.WakeAt, after.WakeAt)

	h, err := tasks.History(ctx, db, id, tasks.HistoryOptions{})
	require.NoError(t, err)
	require.Len(t, h, 1)
	e := h[0]
	require.Equal(t, tasks.OperatorAction, e.Outcome)
	require.Equal(t, "set_state", e.Action)
	require.Equal(t, after.Attempts, e.Attempt)
	require.NotEmpty(t, e.Actor)
	require.JSONEq(t, `{"step": 4, "to": "b@example.com"}`, string(e.State))
	require.JSONEq(t, `{"step": 3, "to": "a@example.com"}`, string(e.StateBefore))
	require.Positive(t, e.StateBytes)

	// Any JSON value; JSON null is the poller's zero value. A task created
	// without a state had none: its entry says so (nil).
	bare, err := tasks.Create(ctx, db, tasks.Spec{Type: "t"})
	require.NoError(t, err)
	for _, state := range []string{`null`, `[1, 2]`, `"text"`, `7`} {
		require.NoError(t, tasks.SetState(ctx, db, bare, json.RawMessage(state)), state)
		got, err := tasks.Get(ctx, db, bare)
		require.NoError(t, err)
		require.JSONEq(t, state, string(got.State))
	}
	h, err = tasks.History(ctx, db, bare, tasks.HistoryOptions{})
	require.NoError(t, err)
	require.Len(t, h, 4)
	require.Nil(t, h[0].StateBefore)
	require.JSONEq(t, `null`, string(h[0].State))
	require.JSONEq(t, `null`, string(h[1].StateBefore))
	require.JSONEq(t, `"text"`, string(h[3].StateBefore))

	// The other actions' entries keep no states.
	require.NoError(t, tasks.ResetFailures(ctx, db, bare))
	h, err = tasks.History(ctx, db, bare, tasks.HistoryOptions{Last: 1})
	require.NoError(t, err)
	require.Equal(t, "reset", h[0].Action)
	require.Nil(t, h[0].State)
	require.Nil(t, h[0].StateBefore)
}

// SetState refuses what is not one JSON value before asking the database,
// and a task that does not exist, has ended, or that an executor holds; a
// refusal changes nothing.
func TestSetStateRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "t", State: map[string]int{"step": 1}})
	require.NoError(t, err)

	for state, want := range map[string]string{
		``:              "invalid JSON state: empty",
		`  `:            "invalid JSON state: empty",
		`{"step": 2`:    "invalid JSON state: unexpected end of JSON input",
		`{"step": 2}}`:  "invalid JSON state: invalid character '}' after top-level value",
		`{step: 2}`:     "invalid JSON state: invalid character 's' looking for beginning of object key string",
		`{"a": 1} {}`:   "invalid JSON state: invalid character '{' after top-level value",
		"\"\xff\"":      "invalid JSON state: not UTF-8",
		`NaN`:           "invalid JSON state: invalid character 'N'",
		`{"a": 1, "a"}`: "invalid JSON state",
	} {
		err := tasks.SetState(ctx, db, id, json.RawMessage(state))
		require.ErrorContains(t, err, "set state of task "+id.String()+": "+want, state)
	}
	require.ErrorContains(t, tasks.SetState(ctx, db, tasks.ID{}, json.RawMessage(`1`)), "no task (zero id)")

	unknown := tasks.NewID()
	err = tasks.SetState(ctx, db, unknown, json.RawMessage(`1`))
	require.ErrorIs(t, err, tasks.ErrNotFound)
	require.ErrorContains(t, err, "set state of task "+unknown.String()+": task not found: "+unknown.String())

	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET claim = gen_random_uuid(), heartbeat = now(),
		claim_expires_at = now() + interval '1 hour', claimed_at = now() WHERE task_id = $1`, id)
	require.NoError(t, err)
	err = tasks.SetState(ctx, db, id, json.RawMessage(`{"step": 2}`))
	require.ErrorIs(t, err, tasks.ErrRunning)
	require.ErrorContains(t, err, "an executor holds it")

	ended, err := tasks.Create(ctx, db, tasks.Spec{Type: "t", State: map[string]int{"step": 1}})
	require.NoError(t, err)
	require.NoError(t, tasks.Cancel(ctx, db, ended))
	err = tasks.SetState(ctx, db, ended, json.RawMessage(`{"step": 2}`))
	require.ErrorIs(t, err, tasks.ErrEnded)

	for _, task := range []tasks.ID{id, ended} {
		got, err := tasks.Get(ctx, db, task)
		require.NoError(t, err)
		require.JSONEq(t, `{"step": 1}`, string(got.State))
		h, err := tasks.History(ctx, db, task, tasks.HistoryOptions{})
		require.NoError(t, err)
		for _, e := range h {
			require.NotEqual(t, "set_state", e.Action)
		}
	}
}

// The SQL function refuses a state that is SQL NULL (JSON null is a state).
func TestSetTaskStateRefusesSQLNull(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "t"})
	require.NoError(t, err)
	_, err = db.Exec(ctx, `SELECT corotask.set_task_state($1, NULL)`, id)
	require.ErrorContains(t, err, "set_task_state needs a state (JSON null for the poller's zero value)")
}
