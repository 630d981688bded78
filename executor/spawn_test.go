package executor_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// A fan-out and fan-in across executors committing concurrently, with the
// parents suspended (woken at each completion) or awaiting their children.
// Awaiting, each parent is polled exactly twice: once to spawn, once when
// its last child has ended (a parent woken before would await again, and be
// polled a third time).
func TestFibonacciFanOutFanInAcrossExecutors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		wait executor.Action
	}{{"suspend", executor.Suspend()}, {"await", executor.AwaitChildren()}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			url := testdb.URL(t)
			db := testdb.Pool(t, url)
			var polls atomic.Int64
			poller := fibPoller(c.wait, &polls)
			for range 3 {
				e := executor.MustNew(testdb.Pool(t, url), fastConfig(t))
				executor.Register(e, "fib", poller)
				start(t, e)
			}
			root, err := tasks.Create(ctx, db, tasks.Spec{Type: "fib", State: fibState{N: 12}})
			require.NoError(t, err)
			task := waitStatus(t, db, root, tasks.StatusDone)
			require.JSONEq(t, "144", string(task.Result))

			var count, done int
			require.NoError(t, db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE outcome = 'done') FROM corotask.tasks`).Scan(&count, &done))
			require.Equal(t, 465, count, "fib(12) makes 465 tasks")
			require.Equal(t, count, done)
			if c.name == "await" {
				// 232 parents polled twice, 233 leaves once.
				require.Equal(t, int64(2*232+233), polls.Load())
				var failures int
				require.NoError(t, db.QueryRow(ctx, `SELECT coalesce(sum(failures), 0) FROM corotask.tasks`).Scan(&failures))
				require.Zero(t, failures)
			}
		})
	}
}
