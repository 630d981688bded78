package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// On a Citus cluster (COROTASK_CITUS_URL; skipped without it), an executor
// claims shard by shard and commits through the coordinator: one-shot tasks,
// each the root of a tree of its own and so spread over every shard, are
// each polled once and done.
func TestCitusClaimAndCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Citus(t)
	ids := createN(t, db, "one", 200)
	var shards int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(DISTINCT get_shard_id_for_distribution_column('corotask.tasks', root_id))
		FROM corotask.tasks`).Scan(&shards))
	require.Greater(t, shards, 16, "the tasks lie on most of the 32 shards")

	e := executor.MustNew(db, fastConfig(t))
	executor.Register(e, "one", executor.PollerFunc[json.RawMessage, json.RawMessage](
		func(ctx context.Context, t *executor.Task[json.RawMessage, json.RawMessage]) (executor.Action, error) {
			return executor.DoneWith(json.RawMessage(`"ok"`)), nil
		}))
	start(t, e)
	waitDone(t, db, len(ids))
	var attempts, history int
	require.NoError(t, db.QueryRow(ctx, `SELECT sum(attempts) FROM corotask.tasks`).Scan(&attempts))
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM corotask.history WHERE outcome = 'committed' AND action = 'done'`).Scan(&history))
	require.Equal(t, len(ids), attempts, "each polled once")
	require.Equal(t, len(ids), history)
}

// On Citus, a cancel ends a subtree that an executor runs: the parent,
// awaiting its children, and its three suspended children (created claimed
// by the parent's commit, and polled) are all canceled.
func TestCitusCancelSubtree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Citus(t)
	e := executor.MustNew(db, fastConfig(t))
	executor.Register(e, "parent", executor.PollerFunc[bool, json.RawMessage](
		func(ctx context.Context, t *executor.Task[bool, json.RawMessage]) (executor.Action, error) {
			if !t.State {
				t.State = true
				for range 3 {
					t.Spawn("child", nil, nil)
				}
			}
			return executor.AwaitChildren(), nil
		}))
	executor.Register(e, "child", executor.PollerFunc[json.RawMessage, json.RawMessage](
		func(ctx context.Context, t *executor.Task[json.RawMessage, json.RawMessage]) (executor.Action, error) {
			return executor.Suspend(), nil
		}))
	start(t, e)
	parent, err := tasks.Create(ctx, db, tasks.Spec{Type: "parent"})
	require.NoError(t, err)
	waitFor(t, "three suspended children", func() bool {
		var n int
		require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM corotask.tasks
			WHERE parent_id = $1 AND wake_at IS NULL AND claim IS NULL AND attempts = 1`, parent).Scan(&n))
		return n == 3
	})
	require.NoError(t, tasks.Cancel(ctx, db, parent))
	var canceled int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM corotask.tasks WHERE outcome = 'canceled'`).Scan(&canceled))
	require.Equal(t, 4, canceled)
}

// On Citus, a claim whose executor stopped renewing it is taken over by
// another executor, counted as a failed attempt, and recorded.
func TestCitusTakeover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Citus(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	entered := make(chan int, 2)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	newExecutor := func(n int) *executor.Executor {
		e := executor.MustNew(db, fastConfig(t))
		executor.Register(e, "job", executor.PollerFunc[int, json.RawMessage](
			func(ctx context.Context, t *executor.Task[int, json.RawMessage]) (executor.Action, error) {
				entered <- n
				if n == 1 {
					<-release // a poll that never returns: PollOnce renews nothing
				}
				return executor.Done(), nil
			}))
		return e
	}
	go func() { _, _ = newExecutor(1).PollOnce(context.Background()) }()
	select {
	case n := <-entered:
		require.Equal(t, 1, n)
	case <-time.After(testdb.Patience):
		t.Fatal("the first executor did not claim the task")
	}
	tag, err := db.Exec(ctx, `UPDATE corotask.tasks SET claim_expires_at = now() - interval '1 second' WHERE task_id = $1`, id)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())
	n, err := newExecutor(2).PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 2, <-entered) // buffered: PollOnce returned after the poll
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusDone, task.Status)
	require.Equal(t, 2, task.Attempts)
	var takenOver int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM corotask.history WHERE task_id = $1 AND outcome = 'taken_over'`, id).Scan(&takenOver))
	require.Equal(t, 1, takenOver)
}

// slowRenewedPolls returns an executor renewing its claims every 50 ms whose
// polls of type "slow" end once release is closed.
func slowRenewedPolls(t *testing.T, db *pgxpool.Pool) (*executor.Executor, chan struct{}) {
	cfg := fastConfig(t)
	cfg.HeartbeatInterval = 50 * time.Millisecond
	e := executor.MustNew(db, cfg)
	release := make(chan struct{})
	executor.Register(e, "slow", executor.PollerFunc[json.RawMessage, json.RawMessage](
		func(ctx context.Context, t *executor.Task[json.RawMessage, json.RawMessage]) (executor.Action, error) {
			<-release
			return executor.Done(), nil
		}))
	return e, release
}

// requireEachPolledOnce waits until the n tasks are done, and checks that
// each was polled once: no claim was lost.
func requireEachPolledOnce(t *testing.T, db tasks.DB, n int) {
	t.Helper()
	waitDone(t, db, n)
	var attempts int
	require.NoError(t, db.QueryRow(context.Background(), `SELECT sum(attempts) FROM corotask.tasks`).Scan(&attempts))
	require.Equal(t, n, attempts, "no claim was lost")
}

// On Citus, an executor renews the claims of its polls in flight (shard by
// shard), and a poll that outlives several renewals commits.
func TestCitusHeartbeatRenews(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Citus(t)
	e, release := slowRenewedPolls(t, db)
	ids := createN(t, db, "slow", 6)
	start(t, e)
	for _, id := range ids {
		var first time.Time
		waitFor(t, "the claim", func() bool {
			err := db.QueryRow(ctx, `SELECT claim_expires_at FROM corotask.tasks WHERE task_id = $1 AND claim IS NOT NULL`, id).Scan(&first)
			return err == nil
		})
		waitFor(t, "a renewal", func() bool {
			var now time.Time
			require.NoError(t, db.QueryRow(ctx, `SELECT claim_expires_at FROM corotask.tasks WHERE task_id = $1`, id).Scan(&now))
			return now.After(first)
		})
	}
	close(release)
	requireEachPolledOnce(t, db, len(ids))
}

// On Citus, a renewal that fails on one shard (here, a trigger on that
// shard's table on its worker refuses every update) keeps the renewals of
// the other shards: the claims there are renewed while the failing shard's
// are not, and once the shard accepts renewals again every poll commits, no
// claim lost.
func TestCitusRenewalFailsOnOneShard(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Citus(t)
	e, release := slowRenewedPolls(t, db)
	ids := createN(t, db, "slow", 8)
	shardOf := func(id tasks.ID) (shard int64) {
		require.NoError(t, db.QueryRow(ctx, `SELECT get_shard_id_for_distribution_column('corotask.tasks', root_id)
			FROM corotask.tasks WHERE task_id = $1`, id).Scan(&shard))
		return shard
	}
	failingShard := shardOf(ids[0])
	var failing, kept []tasks.ID
	for _, id := range ids {
		if shardOf(id) == failingShard {
			failing = append(failing, id)
		} else {
			kept = append(kept, id)
		}
	}
	require.NotEmpty(t, kept, "the tasks lie on more than one shard")

	// The worker holding the failing shard, and the shard's table.
	var node, shardTable string
	var port int
	require.NoError(t, db.QueryRow(ctx, `SELECT nodename, nodeport, shard_name FROM citus_shards
		WHERE table_name = 'corotask.tasks'::regclass AND shardid = $1`, failingShard).Scan(&node, &port, &shardTable))
	cc := db.Config().ConnConfig
	worker := testdb.Pool(t, fmt.Sprintf("postgres://%s@%s:%d/%s", cc.User, node, port, cc.Database))
	onWorker := func(sql string) {
		t.Helper()
		_, err := worker.Exec(ctx, `SET citus.enable_manual_changes_to_shards = on; SET citus.enable_ddl_propagation = off; `+sql)
		require.NoError(t, err)
	}

	expiries := func(ids []tasks.ID) map[tasks.ID]time.Time {
		at := map[tasks.ID]time.Time{}
		rows, err := db.Query(ctx, `SELECT task_id, claim_expires_at FROM corotask.tasks WHERE task_id = ANY ($1) AND claim IS NOT NULL`, ids)
		require.NoError(t, err)
		var id tasks.ID
		var expires time.Time
		_, err = pgx.ForEachRow(rows, []any{&id, &expires}, func() error {
			at[id] = expires
			return nil
		})
		require.NoError(t, err)
		return at
	}
	// renewed waits until each of ids has been renewed since before.
	renewed := func(ids []tasks.ID, before map[tasks.ID]time.Time) {
		t.Helper()
		waitFor(t, "renewals", func() bool {
			now := expiries(ids)
			for _, id := range ids {
				if !now[id].After(before[id]) {
					return false
				}
			}
			return true
		})
	}
	start(t, e)
	waitFor(t, "every claim", func() bool { return len(expiries(ids)) == len(ids) })
	onWorker(`CREATE FUNCTION public.refuse_update() RETURNS trigger LANGUAGE plpgsql AS
		$$BEGIN RAISE EXCEPTION 'this shard refuses updates'; END$$;
		CREATE TRIGGER refuse_update BEFORE UPDATE ON ` + shardTable + ` FOR EACH ROW EXECUTE FUNCTION public.refuse_update()`)
	stuck := expiries(failing)
	// Two renewals of the other shards' claims, the second begun after the
	// trigger was in place.
	renewed(kept, expiries(kept))
	renewed(kept, expiries(kept))
	require.Equal(t, stuck, expiries(failing), "the failing shard's claims were not renewed")

	onWorker(`DROP TRIGGER refuse_update ON ` + shardTable + `; DROP FUNCTION public.refuse_update()`)
	renewed(failing, stuck)
	close(release)
	requireEachPolledOnce(t, db, len(ids))
}

// On Citus, a workflow fans out and in: fib(10)'s tree of 177 tasks, its
// parents awaiting their children, run by two executors (one creating its
// children claimed, the other leaving them to the claims), lies whole on
// its root's shard and ends with the sum.
func TestCitusSpawnAndFanIn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Citus(t)
	for i := range 2 {
		cfg := fastConfig(t)
		cfg.DisableEagerChildren = i == 1
		e := executor.MustNew(db, cfg)
		executor.Register(e, "fib", fibPoller(executor.AwaitChildren(), nil))
		start(t, e)
	}
	root, err := tasks.Create(ctx, db, tasks.Spec{Type: "fib", State: fibState{N: 10}})
	require.NoError(t, err)
	task := waitStatus(t, db, root, tasks.StatusDone)
	require.JSONEq(t, "55", string(task.Result))
	var count, done, roots int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE outcome = 'done'), count(DISTINCT root_id)
		FROM corotask.tasks`).Scan(&count, &done, &roots))
	require.Equal(t, 177, count, "fib(10) makes 177 tasks")
	require.Equal(t, count, done)
	require.Equal(t, 1, roots, "one tree")
	requireNoFailedPolls(t, db)
}

// On Citus, a poll sends a message to a task of another tree (on another
// shard, most likely): it arrives, and wakes its recipient.
func TestCitusSendAcrossTrees(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Citus(t)
	e := executor.MustNew(db, fastConfig(t))
	executor.Register(e, "receiver", executor.PollerFunc[json.RawMessage, string](
		func(ctx context.Context, t *executor.Task[json.RawMessage, string]) (executor.Action, error) {
			if m, ok := t.Inbox.Pop(); ok {
				return executor.DoneWith(m.Body), nil
			}
			return executor.Suspend(), nil
		}))
	executor.Register(e, "sender", executor.PollerFunc[tasks.ID, json.RawMessage](
		func(ctx context.Context, t *executor.Task[tasks.ID, json.RawMessage]) (executor.Action, error) {
			t.Send(t.State, "across")
			return executor.Done(), nil
		}))
	start(t, e)
	var receivers []tasks.ID
	for range 8 {
		r, err := tasks.Create(ctx, db, tasks.Spec{Type: "receiver"})
		require.NoError(t, err)
		receivers = append(receivers, r)
		_, err = tasks.Create(ctx, db, tasks.Spec{Type: "sender", State: r})
		require.NoError(t, err)
	}
	for _, r := range receivers {
		task := waitStatus(t, db, r, tasks.StatusDone)
		require.JSONEq(t, `"across"`, string(task.Result))
	}
	requireNoFailedPolls(t, db)
}

// requireNoFailedPolls checks that no poll failed: nothing was refused.
func requireNoFailedPolls(t *testing.T, db tasks.DB) {
	t.Helper()
	var failed int
	require.NoError(t, db.QueryRow(context.Background(), `SELECT count(*) FROM corotask.history WHERE outcome IN ('failed', 'panicked')`).Scan(&failed))
	require.Zero(t, failed, "failed polls")
}

// On Citus, a failed poll is recorded and retried after its backoff, and a
// child that fails for good tells its parent.
func TestCitusFailedPolls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Citus(t)
	e := executor.MustNew(db, fastConfig(t))
	executor.Register(e, "parent", executor.PollerFunc[bool, string](
		func(ctx context.Context, t *executor.Task[bool, string]) (executor.Action, error) {
			if !t.State {
				t.State = true
				t.Spawn("flaky", nil, nil)
				return executor.AwaitChildren(), nil
			}
			m, ok := t.Inbox.Pop()
			if !ok || !m.Done {
				return executor.Action{}, fmt.Errorf("want the child's completion, got %+v", m)
			}
			return executor.DoneWith(m.Err), nil
		}))
	executor.Register(e, "flaky", executor.PollerFunc[json.RawMessage, json.RawMessage](
		func(ctx context.Context, t *executor.Task[json.RawMessage, json.RawMessage]) (executor.Action, error) {
			return executor.Action{}, errors.New("always fails")
		}), executor.MaxFailures(2), executor.Backoff(time.Millisecond, time.Millisecond))
	start(t, e)
	parent, err := tasks.Create(ctx, db, tasks.Spec{Type: "parent"})
	require.NoError(t, err)
	task := waitStatus(t, db, parent, tasks.StatusDone)
	require.Contains(t, string(task.Result), "always fails")
	var failed, attempts int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE outcome = 'failed'), max(attempts) FILTER (WHERE task_type = 'flaky')
		FROM corotask.tasks`).Scan(&failed, &attempts))
	require.Equal(t, 1, failed)
	require.Equal(t, 2, attempts)
}

// On Citus, retention deletes the tasks that ended before the retention
// period, with their history, and keeps the others.
func TestCitusRetention(t *testing.T) {
	t.Parallel()
	checkRetentionDeletesExpired(t, testdb.Citus(t))
}

// On Citus, which has no unique index of live keys, a poll's keyed
// children are created, and a key a live task holds, or that two children
// of a poll take, fails the poll naming the holder (see TestSpawnKeyed).
func TestCitusSpawnKeyed(t *testing.T) {
	t.Parallel()
	checkSpawnKeyed(t, testdb.Citus(t))
}

// On Citus, a type's MaxConcurrency bounds a claim over every shard, its
// expired claims included: of twelve tasks whose claims expired, spread over
// the shards, PollOnce takes two.
func TestCitusMaxConcurrency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Citus(t)
	createN(t, db, "capped", 12)
	_, err := db.Exec(ctx, `UPDATE corotask.tasks SET claim = '00000000-0000-0000-0000-000000000001',
		claim_expires_at = now() - interval '1 second', attempts = 1`)
	require.NoError(t, err)
	e := executor.MustNew(db, fastConfig(t))
	executor.Register(e, "capped", executor.PollerFunc[any, any](doneAtOnce), executor.MaxConcurrency(2))
	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	var shards int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(DISTINCT get_shard_id_for_distribution_column('corotask.tasks', root_id))
		FROM corotask.tasks`).Scan(&shards))
	require.Greater(t, shards, 2, "the expired claims lie on several shards")
}

// On Citus, an executor refuses to start without its build's claim
// function (a database distributed or migrated last by another build), and
// says to migrate.
func TestCitusRefusesWithoutTheClaimFunction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Citus(t)
	var fn string
	require.NoError(t, db.QueryRow(ctx, `SELECT p.oid::regprocedure::text FROM pg_proc p
		WHERE p.pronamespace = 'corotask'::regnamespace AND p.proname LIKE 'claim\_node\_%'`).Scan(&fn))
	_, err := db.Exec(ctx, `DROP FUNCTION `+fn)
	require.NoError(t, err)
	e := executor.MustNew(db, fastConfig(t))
	executor.Register(e, "job", executor.PollerFunc[any, any](doneAtOnce))
	_, err = e.PollOnce(ctx)
	require.ErrorContains(t, err, "lacks this build's claim function: run corotask migrate")
	require.ErrorContains(t, e.Run(ctx), "lacks this build's claim function")
}
