package executor_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// Heartbeats do not wait for the executor's pool: while pollers hold every
// connection of it, their claims are renewed again and again, and another
// executor does not take their tasks over. (The claims last an hour, so that
// a stall of the machine cannot make them expire: renewals are seen in the
// rows.)
func TestHeartbeatsDoNotWaitForAnExhaustedPool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	admin := testdb.Pool(t, url)
	pool := testdb.PoolOfSize(t, url, 2)

	cfg := executor.Config{Concurrency: 2, HeartbeatTimeout: testdb.LongHeartbeat, HeartbeatInterval: 50 * time.Millisecond,
		PollInterval: 50 * time.Millisecond, ShutdownTimeout: 2 * time.Second,
		DisableListen: true, DisableVacuum: true, Logger: logger(t)}
	a := executor.MustNew(pool, cfg)
	held := make(chan struct{}, 2)
	release := make(chan struct{})
	causes := make(chan error, 2)
	executor.Register(a, "job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			return executor.Action{}, err
		}
		defer conn.Release()
		held <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		causes <- context.Cause(ctx)
		return executor.Done(), nil
	}))
	ids, err := tasks.CreateMany(ctx, admin, []tasks.Spec{{Type: "job"}, {Type: "job"}})
	require.NoError(t, err)
	start(t, a)
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free) // before a stops
	for range 2 {
		select {
		case <-held:
		case <-time.After(testdb.Patience):
			t.Fatal("the pollers did not get the pool's connections")
		}
	}
	var dry time.Time
	require.NoError(t, admin.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&dry))

	// b takes over any task whose heartbeat goes stale.
	var stolen atomic.Int32
	bcfg := cfg
	bcfg.Concurrency = 2
	b := executor.MustNew(testdb.Pool(t, url), bcfg)
	executor.Register(b, "job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		stolen.Add(1)
		return executor.Done(), nil
	}))
	start(t, b)

	// Two renewals of every claim after the pool ran dry.
	renewedAfter := func(at time.Time) time.Time {
		t.Helper()
		var oldest time.Time
		waitFor(t, "claims renewed while the pool is taken", func() bool {
			require.NoError(t, admin.QueryRow(ctx, `SELECT min(heartbeat) FROM corotask.tasks WHERE task_id = ANY($1)`, ids).Scan(&oldest))
			return oldest.After(at)
		})
		return oldest
	}
	renewedAfter(renewedAfter(dry))
	require.Zero(t, stolen.Load(), "a task was taken over")

	free()
	for range 2 {
		require.NoError(t, <-causes, "a poll was canceled")
	}
	for _, id := range ids {
		waitStatus(t, admin, id, tasks.StatusDone)
	}
	require.Zero(t, stolen.Load())
}

// A renewal that cannot finish (it waits for a table lock) cancels the polls
// whose claims it was renewing with executor.ErrRenewTimeout as soon as
// their HeartbeatTimeout passes, not when the lock is released.
func TestBlockedRenewalCancelsPollsAtTheTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	admin := testdb.Pool(t, url)
	const timeout = time.Second
	cfg := executor.Config{Concurrency: 1, HeartbeatTimeout: timeout, HeartbeatInterval: timeout / 5,
		PollInterval: 50 * time.Millisecond, ShutdownTimeout: 2 * time.Second,
		DisableListen: true, DisableVacuum: true, Logger: logger(t)}
	e := executor.MustNew(testdb.Pool(t, url), cfg)
	entered := make(chan struct{}, 1)
	causes := make(chan error, 1)
	executor.Register(e, "job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		entered <- struct{}{}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return executor.Done(), nil
	}))
	_, err := tasks.Create(ctx, admin, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	start(t, e)
	<-entered

	locker, err := admin.Begin(ctx)
	require.NoError(t, err)
	defer locker.Rollback(ctx) //nolint:errcheck
	_, err = locker.Exec(ctx, `LOCK TABLE corotask.tasks IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)
	select {
	case cause := <-causes:
		// The lock is held until the cause arrives: the poll was canceled at
		// the timeout, not when the lock was released.
		require.True(t, errors.Is(cause, executor.ErrRenewTimeout), "cause: %v", cause)
	case <-time.After(testdb.Patience):
		t.Fatal("the poll was not canceled while its renewal was blocked")
	}
	require.NoError(t, locker.Rollback(ctx))
}
