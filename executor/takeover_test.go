package executor_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// takeoverText is what last_error says after a claim was taken over.
const takeoverText = "stopped renewing its claim (crashed, killed or stalled)"

// An executor judges another's claim by the expiry that executor set, not by
// its own HeartbeatTimeout: one with a short timeout does not take a task
// from one with a long timeout whose claim is still fresh.
func TestMixedHeartbeatTimeoutsAgree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	db := testdb.Pool(t, url)

	// A's claim lasts an hour, and A does not renew it while the test runs:
	// its heartbeat only ages.
	cfgA := fastConfig(t)
	cfgA.HeartbeatTimeout, cfgA.HeartbeatInterval = testdb.LongHeartbeat, 20*time.Minute
	a := executor.MustNew(testdb.Pool(t, url), cfgA)
	entered, release := make(chan struct{}), make(chan struct{})
	executor.Register(a, "job", executor.PollerFunc[string, int](func(ctx context.Context, t *executor.Task[string, int]) (executor.Action, error) {
		close(entered)
		<-release
		return executor.DoneWith("A"), nil
	}))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	start(t, a)
	<-entered

	const bTimeout = 300 * time.Millisecond
	waitFor(t, "A's heartbeat to look stale to B's own timeout", func() bool {
		var old bool
		require.NoError(t, db.QueryRow(ctx, `SELECT heartbeat < now() - make_interval(secs => $2) FROM corotask.tasks WHERE task_id = $1`,
			id, bTimeout.Seconds()).Scan(&old))
		return old
	})
	recB := newRecorder()
	cfgB := fastConfig(t)
	cfgB.HeartbeatTimeout, cfgB.HeartbeatInterval = bTimeout, bTimeout/3
	cfgB.Hooks = recB
	b := executor.MustNew(testdb.Pool(t, url), cfgB)
	var bPolls atomic.Int32
	executor.Register(b, "job", executor.PollerFunc[string, int](func(ctx context.Context, t *executor.Task[string, int]) (executor.Action, error) {
		bPolls.Add(1)
		return executor.DoneWith("B"), nil
	}))
	start(t, b)
	// B looks for stale claims several times: it must not take the task over.
	waitFor(t, "B's searches for stale claims", func() bool { return recB.staleSearches() >= 5 })
	require.Zero(t, bPolls.Load())
	close(release)
	task := waitStatus(t, db, id, tasks.StatusDone)
	require.JSONEq(t, `"A"`, string(task.Result))
	require.Zero(t, bPolls.Load())
}

// A poll that crashes its executor is counted: taking over an expired claim
// counts an attempt, and past MaxFailures the task fails, unpolled, with a
// last_error that says why, and its parent is told.
func TestTakeoverOfAnExpiredClaimCountsAnAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	parent, err := tasks.Create(ctx, db, tasks.Spec{Type: "parent", WakeAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	child, err := tasks.Create(ctx, db, tasks.Spec{Type: "job", Parent: parent})
	require.NoError(t, err)

	// Each executor polls with PollOnce, which renews no claim: a poll that
	// never returns is, to the database, an executor that crashed once its
	// claim expires. The claims last an hour; the test expires each.
	release := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(release); wg.Wait() })
	entered := make(chan struct{}, 10)
	newExecutor := func() *executor.Executor {
		e := executor.MustNew(db, fastConfig(t))
		executor.Register(e, "job", executor.PollerFunc[int, json.RawMessage](func(ctx context.Context, t *executor.Task[int, json.RawMessage]) (executor.Action, error) {
			entered <- struct{}{}
			<-release
			return executor.Done(), nil
		}), executor.MaxFailures(3))
		return e
	}
	expire := func() {
		tag, err := db.Exec(ctx, `UPDATE corotask.tasks SET claim_expires_at = now() - interval '1 second'
			WHERE task_id = $1 AND claim_expires_at > now()`, child)
		require.NoError(t, err)
		require.EqualValues(t, 1, tag.RowsAffected(), "the claim was valid")
	}
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = newExecutor().PollOnce(context.Background())
		}()
		<-entered
		task, err := tasks.Get(ctx, db, child)
		require.NoError(t, err)
		require.Equal(t, tasks.StatusRunning, task.Status)
		require.Equal(t, i, task.Failures, "takeovers so far")
		expire()
	}
	// The third takeover reaches MaxFailures: the task fails without a poll.
	n, err := newExecutor().PollOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Empty(t, entered)
	task, err := tasks.Get(ctx, db, child)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusFailed, task.Status)
	require.Equal(t, 3, task.Failures)
	require.Contains(t, task.LastError, takeoverText)

	p, err := tasks.Get(ctx, db, parent)
	require.NoError(t, err)
	require.Len(t, p.Inbox, 1)
	var m struct {
		From string `json:"from"`
		Done bool   `json:"done"`
		Err  string `json:"err"`
	}
	require.NoError(t, json.Unmarshal(p.Inbox[0], &m))
	require.True(t, m.Done)
	require.Equal(t, child.UUID(), m.From)
	require.Contains(t, m.Err, takeoverText)
}

// MaxConcurrency bounds what one claim takes of a type, expired claims and
// ready tasks together.
func TestMaxConcurrencyHoldsForExpiredClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	ids := createN(t, db, "capped", 7)
	// Five of them were claimed by an executor that died.
	_, err := db.Exec(ctx, `UPDATE corotask.tasks SET heartbeat = now() - interval '1 minute', claim = gen_random_uuid(),
		claim_expires_at = now() - interval '30 seconds' WHERE task_id = ANY($1)`, ids[:5])
	require.NoError(t, err)

	e := executor.MustNew(db, fastConfig(t))
	var polls atomic.Int32
	executor.Register(e, "capped", executor.PollerFunc[int, json.RawMessage](func(ctx context.Context, t *executor.Task[int, json.RawMessage]) (executor.Action, error) {
		polls.Add(1)
		return executor.Done(), nil
	}), executor.MaxConcurrency(2))
	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.EqualValues(t, 2, polls.Load())
	var running int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM corotask.tasks WHERE claim IS NOT NULL`).Scan(&running))
	require.Equal(t, 3, running, "the expired claims not taken are left for later")
}
