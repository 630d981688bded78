package executor_test

// Panics in user code that runs around a poll (a state's or message's
// UnmarshalJSON, the poller, a MarshalJSON of the state or the result, an
// OnCommit function) are failed polls: the process lives on, failures rise,
// last_error holds the panic and its stack, and MaxFailures ends the task.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// touchy decodes and encodes like an int, but panics on the value 13.
type touchy int

func (v *touchy) UnmarshalJSON(b []byte) error {
	if strings.TrimSpace(string(b)) == "13" {
		panic("touchy: cannot decode 13")
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("touchy: %w", err)
	}
	*v = touchy(n)
	return nil
}

func (v touchy) MarshalJSON() ([]byte, error) {
	if v == 13 {
		panic("touchy: cannot encode 13")
	}
	return []byte(fmt.Sprint(int(v))), nil
}

func TestPanicsAroundAPollAreFailedPolls(t *testing.T) {
	t.Parallel()
	type poller = executor.PollerFunc[touchy, touchy]
	done := poller(func(ctx context.Context, t *executor.Task[touchy, touchy]) (executor.Action, error) {
		t.Inbox.Pop()
		return executor.Done(), nil
	})
	for _, tc := range []struct {
		name    string
		state   any
		message any
		poller  poller
		want    string // in last_error
		frame   string // in the stack
	}{
		{name: "decoding the state", state: 13, poller: done,
			want: "poller panicked: touchy: cannot decode 13", frame: "UnmarshalJSON"},
		{name: "decoding a message", state: 1, message: 13, poller: done,
			want: "poller panicked: touchy: cannot decode 13", frame: "UnmarshalJSON"},
		{name: "polling", state: 1, poller: func(ctx context.Context, t *executor.Task[touchy, touchy]) (executor.Action, error) {
			var m map[string]int
			m["x"]++ // a nil map
			return executor.Done(), nil
		}, want: "poller panicked: assignment to entry in nil map", frame: "panic_test.go"},
		{name: "encoding the state", state: 1, poller: func(ctx context.Context, t *executor.Task[touchy, touchy]) (executor.Action, error) {
			t.State = 13
			return executor.Yield(), nil
		}, want: "poller panicked: touchy: cannot encode 13", frame: "MarshalJSON"},
		{name: "encoding the result", state: 1, poller: func(ctx context.Context, t *executor.Task[touchy, touchy]) (executor.Action, error) {
			return executor.DoneWith(touchy(13)), nil
		}, want: "poller panicked: touchy: cannot encode 13", frame: "MarshalJSON"},
		{name: "OnCommit", state: 1, poller: func(ctx context.Context, t *executor.Task[touchy, touchy]) (executor.Action, error) {
			t.State = 2
			t.OnCommit(func(ctx context.Context, tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `CREATE TABLE public.written (n int); INSERT INTO public.written VALUES (1)`); err != nil {
					return err
				}
				panic("OnCommit gave up")
			})
			return executor.Done(), nil
		}, want: "OnCommit panicked: OnCommit gave up", frame: "panic_test.go"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := testdb.New(t)
			e := executor.MustNew(db, badConfig(t))
			executor.Register(e, "touchy", tc.poller, executor.MaxFailures(2))
			id, err := tasks.Create(ctx, db, tasks.Spec{Type: "touchy", State: tc.state, Message: tc.message})
			require.NoError(t, err)

			n, err := e.PollOnce(ctx)
			require.Equal(t, 1, n)
			var p *executor.PanicError
			require.ErrorAs(t, err, &p)
			task := requireFailedOnce(t, db, id, tc.want)
			require.Contains(t, task.LastError, "goroutine ", "last_error holds the stack")
			require.Contains(t, task.LastError, tc.frame)
			require.Equal(t, 1, task.InboxLen+boolInt(tc.message == nil), "the message is kept")
			require.JSONEq(t, fmt.Sprint(tc.state), string(task.State), "the state is kept")
			if tc.name == "OnCommit" {
				var exists bool
				require.NoError(t, db.QueryRow(ctx, `SELECT to_regclass('public.written') IS NOT NULL`).Scan(&exists))
				require.False(t, exists, "the commit was rolled back")
			}

			// The second failure ends the task, and the process is still here.
			_, err = db.Exec(ctx, `UPDATE corotask.tasks SET wake_at = now() WHERE task_id = $1`, id)
			require.NoError(t, err)
			_, err = e.PollOnce(ctx)
			require.ErrorAs(t, err, &p)
			task, err = tasks.Get(ctx, db, id)
			require.NoError(t, err)
			require.Equal(t, tasks.StatusFailed, task.Status)
			require.Equal(t, 2, task.Failures)
			require.Contains(t, task.LastError, tc.want)
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A running executor survives a message whose decoder panics at every poll:
// the task's failures rise, and other tasks go on.
func TestRunSurvivesAPanickingDecoder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	cfg := fastConfig(t)
	cfg.BackoffMin, cfg.BackoffMax = time.Millisecond, 10*time.Millisecond
	e := executor.MustNew(db, cfg)
	executor.Register(e, "touchy", executor.PollerFunc[int, touchy](func(ctx context.Context, t *executor.Task[int, touchy]) (executor.Action, error) {
		for {
			if _, ok := t.Inbox.Pop(); !ok {
				break
			}
			t.State++
		}
		return executor.Suspend(), nil
	}))
	bad, err := tasks.Create(ctx, db, tasks.Spec{Type: "touchy", Message: 1})
	require.NoError(t, err)
	require.NoError(t, inbox.Send(ctx, db, bad, tasks.ID{}, 13))
	start(t, e)
	waitFor(t, "three failed polls", func() bool {
		task, err := tasks.Get(ctx, db, bad)
		require.NoError(t, err)
		return task.Failures >= 3
	})
	good, err := tasks.Create(ctx, db, tasks.Spec{Type: "touchy", Message: 1})
	require.NoError(t, err)
	task := waitStatus(t, db, good, tasks.StatusSuspended)
	require.JSONEq(t, "1", string(task.State))
	task, err = tasks.Get(ctx, db, bad)
	require.NoError(t, err)
	require.Contains(t, task.LastError, "poller panicked: touchy: cannot decode 13")
	require.Equal(t, 2, task.InboxLen+task.InboxNextLen, "no message dropped")
}
