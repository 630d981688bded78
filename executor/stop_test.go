package executor_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// claimsSeen records the executor's claim statements.
type claimsSeen struct {
	executor.NoHooks
	mu     sync.Mutex
	claims []executor.ClaimInfo
}

func (h *claimsSeen) ClaimDone(_ context.Context, info *executor.ClaimInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.claims = append(h.claims, *info)
}

func (h *claimsSeen) seen() []executor.ClaimInfo {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]executor.ClaimInfo(nil), h.claims...)
}

// A stop that begins while a claim statement runs lets the claim finish and
// gives its tasks back at once: none is left claimed, unknown to any
// executor, until its claim expires and it is taken over as a failed attempt.
func TestStopDuringClaimGivesTheClaimBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job", State: 0})
	require.NoError(t, err)

	// The claim waits behind a lock on the table, so that the stop comes
	// while it runs.
	lock, err := db.Begin(ctx)
	require.NoError(t, err)
	defer lock.Rollback(ctx)
	_, err = lock.Exec(ctx, "LOCK TABLE corotask.tasks IN EXCLUSIVE MODE")
	require.NoError(t, err)

	hooks := &claimsSeen{}
	cfg := fastConfig(t)
	cfg.Hooks = hooks
	e := executor.MustNew(db, cfg)
	polled := make(chan struct{}, 1)
	executor.Register(e, "job", executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
		polled <- struct{}{}
		return executor.Done(), nil
	}))
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- e.Run(runCtx) }()

	waiting := func() bool {
		var n int
		require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%open_quota%'`).Scan(&n))
		return n > 0
	}
	require.Eventually(t, waiting, testdb.Patience, 10*time.Millisecond, "the claim never waited for the lock")
	stop()
	require.NoError(t, lock.Commit(ctx))
	select {
	case err := <-ran:
		require.NoError(t, err)
	case <-time.After(testdb.Patience):
		t.Fatal("Run did not return")
	}

	require.Empty(t, polled, "a task claimed as the stop began was polled")
	claims := hooks.seen()
	require.NotEmpty(t, claims)
	last := claims[len(claims)-1]
	require.NoError(t, last.Err, "the claim in flight was abandoned, not finished")
	require.Equal(t, 1, last.Claimed)
	var claimed bool
	require.NoError(t, db.QueryRow(ctx, `SELECT claim IS NOT NULL FROM corotask.tasks WHERE task_id = $1`, id).Scan(&claimed))
	require.False(t, claimed, "the stop left the task claimed")
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.NotEqual(t, tasks.StatusRunning, task.Status)
	require.Zero(t, task.Failures, "the stop counted a failed attempt")
}
