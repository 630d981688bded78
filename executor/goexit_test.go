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
func TestPollerThatEndsItsGoroutine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	cfg := fastConfig(t)
	cfg.Concurrency = 1
	cfg.HeartbeatTimeout = time.Second
	cfg.ShutdownTimeout = time.Second
	e := executor.New(db, cfg)
	var calls atomic.Int32
	executor.Register(e, "goexit", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		if calls.Add(1) == 1 {
			runtime.Goexit()
		}
		return executor.Done(), nil
	}))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "goexit"})
	require.NoError(t, err)
	start(t, e)
	waitStatus(t, db, id, tasks.StatusDone)
	require.EqualValues(t, 2, calls.Load(), "polled again once the abandoned claim expired")
}
