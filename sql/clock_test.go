package sql_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// aheadOneHour sets corotask.now in tx an hour past the transaction's now(),
// as an executor with a test clock sets it.
func aheadOneHour(t *testing.T, tx pgx.Tx) {
	t.Helper()
	_, err := tx.Exec(context.Background(), `SELECT set_config('corotask.now', (now() + interval '1 hour')::text, true)`)
	require.NoError(t, err)
}

// dueByClaim tells whether the claim's predicate finds task due in q's
// transaction.
func dueByClaim(t *testing.T, q pgx.Tx, task tasks.ID) bool {
	t.Helper()
	var due bool
	require.NoError(t, q.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM corotask.tasks
		WHERE task_id = $1 AND claim IS NULL AND done_at IS NULL AND wake_at <= corotask.now())`, task).Scan(&due))
	return due
}

// commitSleep commits a poll of task, which holds claim, that sleeps secs.
func commitSleep(t *testing.T, q tasks.DB, task tasks.ID, claim [16]byte, secs float64) {
	t.Helper()
	var polled tasks.ID
	require.NoError(t, q.QueryRow(context.Background(), `SELECT polled FROM corotask.commit_polls(
		ARRAY[$1::uuid], ARRAY[$2::uuid], ARRAY['null'::jsonb], ARRAY[0], ARRAY['sleep'], ARRAY[$3::float8],
		ARRAY[NULL::timestamptz], ARRAY[NULL::jsonb], ARRAY[NULL::jsonb], ARRAY[0::smallint], 20, 100, ARRAY[NULL::uuid],
		NULL::uuid, NULL::float8, ARRAY[NULL::bigint], ARRAY[NULL::bigint])`, task, claim, secs).Scan(&polled))
	require.Equal(t, task, polled)
}

// inTx runs f in a transaction of db, and commits it.
func inTx(t *testing.T, db *pgxpool.Pool, f func(tx pgx.Tx)) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	f(tx)
	require.NoError(t, tx.Commit(ctx))
}

// Where a transaction set corotask.now, the functions and the claim's
// predicate go by it: a task sleeping 30 minutes is due an hour ahead, and a
// sleep or a failure's backoff counts from the time set.
func TestSetClockDecidesWakes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	task, err := tasks.Create(ctx, db, tasks.Spec{Type: "clock"})
	require.NoError(t, err)
	commitSleep(t, db, task, testdb.Claim(t, db, task, 1), 30*60)

	inTx(t, db, func(tx pgx.Tx) {
		require.False(t, dueByClaim(t, tx, task), "sleeping by the transaction's now()")
		aheadOneHour(t, tx)
		require.True(t, dueByClaim(t, tx, task), "due an hour ahead")
		var status string
		require.NoError(t, tx.QueryRow(ctx, `SELECT corotask.status(t) FROM corotask.tasks t WHERE task_id = $1`, task).Scan(&status))
		require.NotEqual(t, "sleeping", status)
	})

	claim := testdb.Claim(t, db, task, 2)
	inTx(t, db, func(tx pgx.Tx) {
		aheadOneHour(t, tx)
		commitSleep(t, tx, task, claim, 30*60)
		var fromSetTime bool
		require.NoError(t, tx.QueryRow(ctx, `SELECT wake_at = corotask.now() + interval '30 minutes'
			AND corotask.now() = now() + interval '1 hour' FROM corotask.tasks WHERE task_id = $1`, task).Scan(&fromSetTime))
		require.True(t, fromSetTime, "the sleep counts from the time set")
	})

	claim = testdb.Claim(t, db, task, 3)
	inTx(t, db, func(tx pgx.Tx) {
		aheadOneHour(t, tx)
		var lost, ended bool
		require.NoError(t, tx.QueryRow(ctx, `SELECT claim_lost, ended FROM corotask.fail_poll(
			$1, $2, 'boom', interval '10 minutes', 0, 'failed', '', 0::smallint, 20, 100)`, task, claim).Scan(&lost, &ended))
		require.False(t, lost)
		require.False(t, ended)
		var fromSetTime bool
		require.NoError(t, tx.QueryRow(ctx, `SELECT wake_at = now() + interval '1 hour 10 minutes'
			FROM corotask.tasks WHERE task_id = $1`, task).Scan(&fromSetTime))
		require.True(t, fromSetTime, "the backoff counts from the time set")
	})
}

// Without the setting, or once the transaction that set it has ended (the
// setting is then empty, not missing), corotask.now() is now().
func TestClockIsNowWithoutTheSetting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	conn, err := db.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	isNow := func() bool {
		var same bool
		require.NoError(t, conn.QueryRow(ctx, `SELECT corotask.now() = now()`).Scan(&same))
		return same
	}
	require.True(t, isNow())
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	aheadOneHour(t, tx)
	require.NoError(t, tx.Commit(ctx))
	var setting string
	require.NoError(t, conn.QueryRow(ctx, `SELECT current_setting('corotask.now')`).Scan(&setting))
	require.Empty(t, setting)
	require.True(t, isNow())
}
