package executor_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// A poller that ends its goroutine with runtime.Goexit (t.FailNow or a
// require.* call inside a poller, in users' tests) must still free its slot
// and stop renewing the claim, so that the task is taken over and polled
// again once the claim expires.
//
// Claims last an hour here: the test makes the abandoned claim expire once
// the renewals show it is no longer renewed (a marker task, polled all along,
// keeps them going), so no stall of the machine can expire a claim early.
func TestPollerThatEndsItsGoroutine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	rec := newRecorder()
	cfg := fastConfig(t)
	cfg.Concurrency = 2 // the marker's slot, and one for the other task
	cfg.HeartbeatTimeout, cfg.HeartbeatInterval = testdb.LongHeartbeat, 20*time.Millisecond
	cfg.ShutdownTimeout = time.Second
	cfg.Hooks = rec
	e := executor.MustNew(db, cfg)
	markerIn := make(chan struct{})
	executor.Register(e, "marker", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		close(markerIn)
		<-ctx.Done()
		return executor.Action{}, context.Cause(ctx)
	}))
	var calls atomic.Int32
	executor.Register(e, "goexit", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		if calls.Add(1) == 1 {
			runtime.Goexit()
		}
		return executor.Done(), nil
	}))
	_, err := tasks.Create(ctx, db, tasks.Spec{Type: "marker"})
	require.NoError(t, err)
	start(t, e)
	<-markerIn
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "goexit"})
	require.NoError(t, err)
	waitFor(t, "the poll that ends its goroutine", func() bool { return calls.Load() == 1 })

	// Renewals after the Goexit renew the marker's claim alone. (The first
	// may have counted its claims before the Goexit; the next one did not.)
	seen := rec.heartbeatCount()
	waitFor(t, "renewals of the marker's claim alone", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		after := rec.heartbeats[seen:]
		return len(after) >= 2 && after[len(after)-1].Claims == 1
	})
	require.EqualValues(t, 1, calls.Load(), "not polled again while its claim is valid")
	var claim [16]byte
	require.NoError(t, db.QueryRow(ctx, `SELECT claim FROM corotask.tasks WHERE task_id = $1`, id).Scan(&claim))
	tag, err := db.Exec(ctx, `UPDATE corotask.tasks SET claim_expires_at = now() - interval '1 second'
		WHERE task_id = $1 AND claim = $2`, id, claim)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())

	waitStatus(t, db, id, tasks.StatusDone)
	require.EqualValues(t, 2, calls.Load(), "polled again once the abandoned claim expired")
}
