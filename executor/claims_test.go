package executor_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

func TestTwoExecutorsNeverPollOneTaskAtOnce(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	db := testdb.Pool(t, url)
	var (
		mu       sync.Mutex
		inside   = map[tasks.ID]bool{}
		overlaps int
		polls    atomic.Int64
	)
	poller := executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		mu.Lock()
		if inside[t.ID] {
			overlaps++
		}
		inside[t.ID] = true
		mu.Unlock()
		polls.Add(1)
		defer func() { mu.Lock(); inside[t.ID] = false; mu.Unlock() }()
		t.State++
		if t.State == 15 {
			return executor.Done(), nil
		}
		return executor.Yield(), nil
	})
	for i := 0; i < 2; i++ {
		e := executor.MustNew(testdb.Pool(t, url), fastConfig(t))
		executor.Register(e, "yielder", poller)
		start(t, e)
	}
	createN(t, db, "yielder", 20)
	waitDone(t, db, 20)
	mu.Lock()
	defer mu.Unlock()
	require.Zero(t, overlaps)
	require.EqualValues(t, 20*15, polls.Load(), "each poll committed once")
}

func TestStolenClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	db := testdb.Pool(t, url)

	// Executor A renews often, and its claims last an hour: only the test
	// makes A's claim expire (as if A had stalled past it), and B takes the
	// task over.
	cfgA := fastConfig(t)
	cfgA.HeartbeatTimeout, cfgA.HeartbeatInterval = testdb.LongHeartbeat, 200*time.Millisecond
	cfgA.Concurrency = 1 // busy with its one poll: it cannot take the task back itself
	a := executor.MustNew(testdb.Pool(t, url), cfgA)
	aEntered := make(chan struct{})
	aCause := make(chan error, 1)
	executor.Register(a, "job", executor.PollerFunc[string, int](func(ctx context.Context, t *executor.Task[string, int]) (executor.Action, error) {
		t.State = "A"
		close(aEntered)
		<-ctx.Done()
		aCause <- context.Cause(ctx)
		return executor.DoneWith("A"), nil
	}))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job", State: "initial"})
	require.NoError(t, err)
	start(t, a)
	<-aEntered

	cfgB := fastConfig(t)
	b := executor.MustNew(testdb.Pool(t, url), cfgB)
	executor.Register(b, "job", executor.PollerFunc[string, int](func(ctx context.Context, t *executor.Task[string, int]) (executor.Action, error) {
		if t.State != "initial" {
			return executor.Action{}, fmt.Errorf("B sees state %q, want the last committed one", t.State)
		}
		t.State = "B"
		return executor.DoneWith("B"), nil
	}))
	start(t, b)
	expireUntilTakenOver(t, db, id)

	task := waitStatus(t, db, id, tasks.StatusDone)
	require.JSONEq(t, `"B"`, string(task.Result))
	select {
	case cause := <-aCause:
		require.ErrorIs(t, cause, executor.ErrClaimLost)
	case <-time.After(testdb.Patience):
		t.Fatal("A's poll was not canceled")
	}
	// A's outcome was not committed.
	task, err = tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.JSONEq(t, `"B"`, string(task.Result))
	require.JSONEq(t, `"B"`, string(task.State))
}

func TestCommitWithStaleClaimChangesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job", State: "initial", Message: "keep me"})
	require.NoError(t, err)
	// Claimed twice: the first claim's token is stale.
	var first, second string
	require.NoError(t, db.QueryRow(ctx, `UPDATE corotask.tasks SET heartbeat = now(), claim = gen_random_uuid() WHERE task_id = $1 RETURNING claim::text`, id).Scan(&first))
	require.NoError(t, db.QueryRow(ctx, `UPDATE corotask.tasks SET heartbeat = now(), claim = gen_random_uuid() WHERE task_id = $1 RETURNING claim::text`, id).Scan(&second))
	child := tasks.NewID()
	rows, err := db.Query(ctx, `SELECT corotask.commit_polls(ARRAY[$1::uuid], ARRAY[$2::uuid], ARRAY['"A"'::jsonb], ARRAY[1], ARRAY['done'],
		ARRAY[NULL::float8], ARRAY[NULL::timestamptz], ARRAY['"A"'::jsonb],
		ARRAY[jsonb_build_object('spawn', jsonb_build_array(jsonb_build_object('id', $3::uuid, 'type', 'kid')))],
		ARRAY[1::smallint], 20, 100, ARRAY[NULL::uuid], NULL, NULL, ARRAY[NULL::bigint], ARRAY[NULL::bigint])`, id, first, child)
	require.NoError(t, err)
	require.False(t, rows.Next(), "nothing committed")
	rows.Close()
	require.NoError(t, rows.Err())
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusRunning, task.Status)
	require.JSONEq(t, `"initial"`, string(task.State))
	require.Equal(t, 1, task.InboxLen)
	_, err = tasks.Get(ctx, db, child)
	require.ErrorIs(t, err, tasks.ErrNotFound)

	var lost, ended bool
	require.NoError(t, db.QueryRow(ctx, `SELECT claim_lost, ended FROM corotask.fail_poll($1, $2::uuid, 'x', '1s', 0, 'failed', '', 1::smallint, 20, 100)`, id, first).Scan(&lost, &ended))
	require.True(t, lost)
	task, err = tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Zero(t, task.Failures)
}
