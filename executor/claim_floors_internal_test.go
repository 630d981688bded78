package executor

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// holdHorizon keeps a transaction with an ID open on db until the test ends:
// no row version that ends after it began can be removed, nor its index
// entries marked dead.
func holdHorizon(t *testing.T, db *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Acquire(ctx)
	require.NoError(t, err)
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "SELECT txid_current()")
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = tx.Rollback(context.Background())
		conn.Release()
	})
}

// endTasks makes n tasks of typ, ready since an hour ago, and claims and
// ends them as claims and commits do: each leaves the entry of its ready
// row version in the ready index, and that of its claimed one (a claim that
// expired an hour ago) in the index of running tasks.
func endTasks(t *testing.T, db *pgxpool.Pool, typ tasks.Type, n int) {
	t.Helper()
	ctx := context.Background()
	specs := make([]tasks.Spec, n)
	for i := range specs {
		specs[i] = tasks.Spec{Type: typ, WakeAt: time.Now().Add(-time.Hour)}
	}
	_, err := tasks.CreateMany(ctx, db, specs)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET claim = gen_random_uuid(), heartbeat = now(),
		claim_expires_at = now() - interval '1 hour' WHERE task_type = $1 AND claim IS NULL AND done_at IS NULL`, typ)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET claim = NULL, heartbeat = NULL, claim_expires_at = NULL,
		wake_at = NULL, done_at = now(), outcome = 'done' WHERE task_type = $1 AND claim IS NOT NULL`, typ)
	require.NoError(t, err)
}

// enterFloorMode holds the horizon back, leaves the entries of 5,000 ended
// tasks in the ready index, and claims twice: one claim that walks them all
// does not start floor mode, two in a row do. It returns the request of the
// claims that follow (no search for stale claims).
func enterFloorMode(t *testing.T, e *Executor, db *pgxpool.Pool) claimRequest {
	t.Helper()
	holdHorizon(t, db)
	endTasks(t, db, "job", 5000)
	req := e.claimer.request()
	require.True(t, req.stale, "the first claim looks for stale claims")
	require.Empty(t, claimIDs(t, e, req))
	require.False(t, (&e.claimer.floors).on, "one claim that walked many entries")
	req.stale = false
	require.Empty(t, claimIDs(t, e, req))
	require.True(t, (&e.claimer.floors).on, "two claims in a row that walked many entries")
	return req
}

// floorTestExecutor is an executor of type "job" whose claims look for
// stale claims only when the test says so.
func floorTestExecutor(t *testing.T, db *pgxpool.Pool) *Executor {
	e := MustNew(db, Config{Concurrency: 10, PollInterval: time.Hour, Logger: testdb.Logger(t)})
	Register(e, "job", PollerFunc[int, int](func(context.Context, *Task[int, int]) (Action, error) {
		return Done(), nil
	}))
	return e
}

// claimIDs runs e's claim of req, and returns the IDs it claimed, in order.
func claimIDs(t *testing.T, e *Executor, req claimRequest) []tasks.ID {
	t.Helper()
	got, _, err := e.claimer.claim(context.Background(), req)
	require.NoError(t, err)
	ids := make([]tasks.ID, len(got))
	for i, c := range got {
		ids[i] = c.id
	}
	return ids
}

// trialClaim runs the claim statement of req from floors (and, looking for
// stale claims, from staleFloor) in a transaction it rolls back, and returns
// the IDs it claimed, in order, and how many entries of the ready index and
// of the index of running tasks it walked.
func trialClaim(t *testing.T, db *pgxpool.Pool, e *Executor, req claimRequest, floors []pgtype.Timestamptz, staleFloor pgtype.Timestamptz) (ids []tasks.ID, ready, running int64) {
	t.Helper()
	ctx := context.Background()
	const walked = `SELECT pg_stat_get_xact_tuples_returned('corotask.tasks_ready_idx'::regclass),
		pg_stat_get_xact_tuples_returned('corotask.tasks_running_idx'::regclass)`
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, query.ClaimSettings)
		require.NoError(t, err)
		var ready0, running0 int64
		require.NoError(t, tx.QueryRow(ctx, walked).Scan(&ready0, &running0))
		rows, err := tx.Query(ctx, query.Claim, req.open, req.total, req.capped, req.caps,
			e.env.cfg.HeartbeatTimeout.Seconds(), req.all, e.env.id, req.polling, req.window, floors, staleFloor, req.stale)
		require.NoError(t, err)
		for rows.Next() {
			v, err := rows.Values()
			require.NoError(t, err)
			if v[0] != nil {
				ids = append(ids, tasks.ID(v[0].([16]byte)))
			}
		}
		require.NoError(t, rows.Err())
		require.NoError(t, tx.QueryRow(ctx, walked).Scan(&ready, &running))
		ready, running = ready-ready0, running-running0
		return pgx.ErrTxClosed // roll back
	})
	require.ErrorIs(t, err, pgx.ErrTxClosed)
	return ids, ready, running
}

func create(t *testing.T, db *pgxpool.Pool, n int) []tasks.ID {
	t.Helper()
	ids := make([]tasks.ID, n)
	for i := range ids {
		id, err := tasks.Create(context.Background(), db, tasks.Spec{Type: "job"})
		require.NoError(t, err)
		ids[i] = id
	}
	return ids
}

// While a transaction holds the horizon back, the entries of the tasks
// claimed since stay in the ready index, and a claim from the oldest ready
// task walks them all. Two claims in a row that walk thousands of entries
// they cannot use start floor mode, and the claims then start from the
// floors: they claim the same tasks, in the same order, walking a handful.
func TestFloorsSkipTheEntriesAHeldHorizonKeeps(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	e := floorTestExecutor(t, db)
	req := enterFloorMode(t, e, db)

	// The first claim in floor mode reads from the oldest entry, and learns
	// the floor.
	first := create(t, db, 3)
	req = e.claimer.request()
	require.False(t, req.stale)
	require.Equal(t, first, claimIDs(t, e, req))
	f := (&e.claimer.floors)
	f.mu.Lock()
	floor, ok := f.at["job"]
	f.mu.Unlock()
	require.True(t, ok, "the claim returned the type's floor")

	next := create(t, db, 3)
	floors := []pgtype.Timestamptz{{Time: floor, Valid: true}}
	full, walkedFull, _ := trialClaim(t, db, e, req, nil, pgtype.Timestamptz{})
	fromFloor, walkedFromFloor, _ := trialClaim(t, db, e, req, floors, pgtype.Timestamptz{})
	require.Equal(t, next, full)
	require.Equal(t, full, fromFloor, "the same tasks, in the same order")
	require.Greater(t, walkedFull, int64(5000))
	require.Less(t, walkedFromFloor, int64(100))

	// The search for stale claims walks the index of running tasks from
	// the oldest expiry, or from its floor.
	req.stale = true
	_, _, runningFull := trialClaim(t, db, e, req, floors, pgtype.Timestamptz{})
	_, _, runningFromFloor := trialClaim(t, db, e, req, floors, pgtype.Timestamptz{Time: time.Now().Add(-time.Minute), Valid: true})
	require.GreaterOrEqual(t, runningFull, int64(5000))
	require.Less(t, runningFromFloor, int64(100))
	req.stale = false
	require.Equal(t, next, claimIDs(t, e, req))
}

// One claim that walks many entries it cannot use may have walked those of
// tasks that ended just before it, and marked them dead: floor mode starts
// only when the next claim, which counts them too, walks as many, and ends
// with a full claim that walks few.
func TestFloorModeNeedsTwoClaimsInARow(t *testing.T) {
	t.Parallel()
	req := claimRequest{total: 10, open: []string{"job"}, all: []string{"job"}, stale: true}
	many := claimResult{walked: floorModeEntries + 1000}
	few := claimResult{walked: 20}
	f := &readyFloors{at: map[string]time.Time{}}
	// The clock is the test's: claims begin at t0 and take a millisecond.
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const took = time.Millisecond
	count := func() bool {
		_, _, full, count := f.from(req, time.Second, t0)
		require.True(t, full, "outside floor mode, every claim is a full one")
		return count
	}

	f.settle(req, many, true, true, t0, took)
	require.False(t, f.on)
	req.stale = false
	require.True(t, count(), "the next claim counts too")
	f.settle(req, few, true, true, t0, took)
	require.False(t, f.on)
	require.False(t, count(), "only claims that look for stale claims count")

	req.stale = true
	require.Equal(t, floorModeKept, f.settle(req, many, true, true, t0, took))
	req.stale = false
	require.Equal(t, floorModeStarted, f.settle(req, many, true, true, t0, took))
	require.True(t, f.on, "two in a row")
	_, _, full, _ := f.from(req, time.Second, t0.Add(time.Second/2))
	require.False(t, full, "a full claim was made just now")
	_, stale, full, counted := f.from(req, time.Second, t0.Add(time.Second))
	require.True(t, full && counted, "a full claim is due")
	require.Equal(t, oldest, stale, "a full claim reads the stale claims from the oldest too")
	require.Equal(t, floorModeKept, f.settle(req, many, true, true, t0.Add(time.Second), time.Minute))
	_, _, full, _ = f.from(req, time.Second, t0.Add(time.Second+9*time.Second))
	require.False(t, full, "a full claim that took a minute spaces the next ones")
	_, _, full, _ = f.from(req, time.Second, t0.Add(time.Second+maxFullClaimSpacing*time.Second))
	require.True(t, full, "but no more than maxFullClaimSpacing PollIntervals apart")
	require.Equal(t, floorModeEnded, f.settle(req, few, true, true, t0.Add(20*time.Second), took))
	require.False(t, f.on, "a full claim that walked few")
}

// In floor mode, a task made ready below its type's floor (here, created
// with a wake_at an hour old) is claimed by the next full claim.
func TestFullClaimFindsTasksBelowTheFloor(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	e := floorTestExecutor(t, db)
	req := enterFloorMode(t, e, db)
	create(t, db, 1)
	require.Len(t, claimIDs(t, e, req), 1, "the claim that learns the floor")

	late, err := tasks.Create(context.Background(), db, tasks.Spec{Type: "job", WakeAt: time.Now().Add(-time.Hour)})
	require.NoError(t, err)
	require.Empty(t, claimIDs(t, e, req), "below the floor")
	f := (&e.claimer.floors)
	f.mu.Lock()
	f.lastFull = time.Time{} // a full claim is due
	f.mu.Unlock()
	require.Equal(t, []tasks.ID{late}, claimIDs(t, e, req))
}

// In floor mode, a claim that does not look for expired claims (its
// statement has no such search) leaves that search's floor where the last
// search left it: a claim that expired above that floor is taken over by
// the next search, however many claims ran between.
func TestClaimsWithoutTheStaleSearchKeepItsFloor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := floorTestExecutor(t, db)
	req := enterFloorMode(t, e, db)
	f := &e.claimer.floors
	req.stale = true
	require.Empty(t, claimIDs(t, e, req), "the search that sets the floor")
	f.mu.Lock()
	floor := f.stale
	f.mu.Unlock()
	require.True(t, floor.Valid)

	// A claim of another executor that expired just above the floor.
	id := create(t, db, 1)[0]
	_, err := db.Exec(ctx, `UPDATE corotask.tasks SET claim = gen_random_uuid(), claimed_by = gen_random_uuid(),
		claimed_at = now(), heartbeat = now(), claim_expires_at = $2 WHERE task_id = $1`, id, floor.Time.Add(time.Microsecond))
	require.NoError(t, err)
	req.stale = false
	for range 3 {
		require.Empty(t, claimIDs(t, e, req))
	}
	f.mu.Lock()
	kept := f.stale
	f.mu.Unlock()
	require.Equal(t, floor, kept, "claims without the search keep its floor")
	req.stale = true
	require.Equal(t, []tasks.ID{id}, claimIDs(t, e, req), "the next search takes it over")
}
