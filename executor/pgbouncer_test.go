package executor_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/pgbouncer"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// Behind a real PgBouncer in transaction mode, with LISTEN off and pgx's
// cache_describe query mode (docs/operations.md), executors claim, spawn and
// await children, send messages, cancel a running task, and hand work over
// from a stopped executor to a new one.
func TestBehindPgBouncerInTransactionMode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgbouncer.Start(t, testdb.URL(t), pgbouncer.Options{PoolSize: 4})
	db := testdb.Pool(t, withQueryExecMode(t, url, "cache_describe"))

	newExecutor := func() *executor.Executor {
		cfg := fastConfig(t)
		cfg.DisableListen = true
		// The first executor stops with the blocking poll in flight: it
		// gives the task back at once rather than after 5s.
		cfg.ShutdownTimeout = 10 * time.Millisecond
		e := executor.MustNew(testdb.Pool(t, withQueryExecMode(t, url, "cache_describe")), cfg)
		executor.Register(e, "fib", fibPoller(executor.AwaitChildren(), nil))
		executor.Register(e, "echo", executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
			if m, ok := t.Inbox.Pop(); ok {
				return executor.DoneWith(m.Body), nil
			}
			return executor.Suspend(), nil
		}))
		executor.Register(e, "block", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
			<-ctx.Done()
			return executor.Action{}, ctx.Err()
		}))
		return e
	}

	// Two executors share the work; then the first stops, and a third
	// takes over what is left.
	stop1 := start(t, newExecutor())
	start(t, newExecutor())
	fib, err := tasks.Create(ctx, db, tasks.Spec{Type: "fib", State: fibState{N: 10}})
	require.NoError(t, err)
	echo, err := tasks.Create(ctx, db, tasks.Spec{Type: "echo"})
	require.NoError(t, err)
	block, err := tasks.Create(ctx, db, tasks.Spec{Type: "block"})
	require.NoError(t, err)
	waitStatus(t, db, echo, tasks.StatusSuspended)
	waitStatus(t, db, block, tasks.StatusRunning)
	stop1()
	start(t, newExecutor())

	require.NoError(t, inbox.Send(ctx, db, echo, tasks.ID{}, "hello"))
	require.NoError(t, tasks.Cancel(ctx, db, block))
	task := waitStatus(t, db, echo, tasks.StatusDone)
	require.JSONEq(t, `"hello"`, string(task.Result))
	task = waitStatus(t, db, fib, tasks.StatusDone)
	require.JSONEq(t, `55`, string(task.Result))
	waitStatus(t, db, block, tasks.StatusCanceled)
}

// Run refuses, at start and with an error that names the fix, each setting
// that cannot work behind PgBouncer 1.18: LISTEN and the query modes that
// keep statements prepared on a connection, in transaction mode; any query
// mode in statement mode, which refuses transactions. In session mode
// everything works.
func TestRunRefusesWhatPgBouncerCannotCarry(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, poolMode, queryMode string
		listen                    bool
		want                      error
		says                      string
	}{
		{"listen", "transaction", "cache_describe", true, executor.ErrListenUnreachable, "set Config.DisableListen"},
		{"cache_statement", "transaction", "cache_statement", false, executor.ErrPreparedStatementsLost, "set default_query_exec_mode=cache_describe"},
		{"describe_exec", "transaction", "describe_exec", false, executor.ErrPreparedStatementsLost, "set default_query_exec_mode=cache_describe"},
		{"statement_pooling", "statement", "cache_describe", false, executor.ErrTransactionsRefused, "use pool_mode = transaction or session"},
		{"session_pooling", "session", "cache_statement", true, nil, ""},
		{"session_pooling_describe_exec", "session", "describe_exec", false, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			url := pgbouncer.Start(t, testdb.URL(t), pgbouncer.Options{PoolMode: c.poolMode})
			db := testdb.Pool(t, withQueryExecMode(t, url, c.queryMode))
			cfg := fastConfig(t)
			cfg.DisableListen = !c.listen
			e := executor.MustNew(db, cfg)
			executor.Register(e, "echo", executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
				if m, ok := t.Inbox.Pop(); ok {
					return executor.DoneWith(m.Body), nil
				}
				return executor.Suspend(), nil
			}))
			if c.want == nil {
				start(t, e)
				ctx := context.Background()
				id, err := tasks.Create(ctx, db, tasks.Spec{Type: "echo"})
				require.NoError(t, err)
				waitStatus(t, db, id, tasks.StatusSuspended)
				require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, "hello"))
				waitStatus(t, db, id, tasks.StatusDone)
				return
			}
			// The deadline only ends a Run that failed to refuse.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			err := e.Run(ctx)
			require.ErrorIs(t, err, c.want)
			require.ErrorContains(t, err, c.says)
			t.Log(err)
		})
	}
}
