package heartbeat_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/heartbeat"
	"github.com/corotask/corotask/internal/testdb"
	_ "github.com/corotask/corotask/internal/testexit" // no race detector pause at exit
	"github.com/corotask/corotask/tasks"
)

// TestMain runs more tests at once than there are CPUs: they spend their time
// waiting for the database.
func TestMain(m *testing.M) {
	os.Exit(testdb.Main(m, 8))
}

// countingDB counts the statements sent through it, and can be made to fail.
type countingDB struct {
	tasks.DB
	mu      sync.Mutex
	queries int
	fail    error
}

func (c *countingDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c.mu.Lock()
	c.queries++
	fail := c.fail
	c.mu.Unlock()
	if fail != nil {
		return nil, fail
	}
	return c.DB.Query(ctx, sql, args...)
}

// claim marks tasks as claimed the way an executor does, and returns their claims.
func claim(t *testing.T, db tasks.DB, n int) []heartbeat.Claim {
	t.Helper()
	ctx := context.Background()
	specs := make([]tasks.Spec, n)
	for i := range specs {
		specs[i] = tasks.Spec{Type: "job"}
	}
	ids, err := tasks.CreateMany(ctx, db, specs)
	require.NoError(t, err)
	out := make([]heartbeat.Claim, n)
	for i, id := range ids {
		var token pgtype.UUID
		require.NoError(t, db.QueryRow(ctx, `UPDATE corotask.tasks SET heartbeat = now() - interval '1 minute', claim = gen_random_uuid()
			WHERE task_id = $1 RETURNING claim`, id).Scan(&token))
		out[i] = heartbeat.Claim{Task: id, Token: token.Bytes}
	}
	return out
}

func TestRenewAllClaimsInOneStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := &countingDB{DB: testdb.New(t)}
	k := heartbeat.New(db, heartbeat.Config{Timeout: testdb.LongHeartbeat})
	claims := claim(t, db.DB, 500)
	for _, c := range claims {
		k.Add(c, time.Now(), func(cause error) { t.Errorf("claim %s lost: %v", c.Task, cause) })
	}
	require.Equal(t, 500, k.Len())
	var before time.Time
	require.NoError(t, db.DB.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&before))
	require.NoError(t, k.Renew(ctx))
	require.Equal(t, 1, db.queries, "one statement for all claims")

	var fresh int
	require.NoError(t, db.DB.QueryRow(ctx, `SELECT count(*) FROM corotask.tasks WHERE heartbeat > $1`, before).Scan(&fresh))
	require.Equal(t, 500, fresh)

	for _, c := range claims {
		k.Remove(c)
	}
	require.NoError(t, k.Renew(ctx))
	require.Equal(t, 1, db.queries, "nothing to renew: no statement")
}

func TestLostClaimIsReportedAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	k := heartbeat.New(db, heartbeat.Config{Timeout: testdb.LongHeartbeat})
	claims := claim(t, db, 2)
	causes := make(chan error, 2)
	k.Add(claims[0], time.Now(), func(cause error) { causes <- cause })
	k.Add(claims[1], time.Now(), func(cause error) { t.Errorf("kept claim reported lost: %v", cause) })

	// Another executor takes the first task.
	_, err := db.Exec(ctx, `UPDATE corotask.tasks SET claim = gen_random_uuid() WHERE task_id = $1`, claims[0].Task)
	require.NoError(t, err)
	require.NoError(t, k.Renew(ctx))
	require.ErrorIs(t, <-causes, executor.ErrClaimLost)
	require.Equal(t, 1, k.Len(), "a lost claim is no longer renewed")

	// A canceled task's claim is lost too, with the cause a cancel gives
	// (the renewal may learn of it before the notification arrives).
	require.NoError(t, tasks.Cancel(ctx, db, claims[1].Task))
	k.Remove(claims[1])
	k.Add(claims[1], time.Now(), func(cause error) { causes <- cause })
	require.NoError(t, k.Renew(ctx))
	require.ErrorIs(t, <-causes, executor.ErrCanceled)
	require.Zero(t, k.Len())
}

func TestUnrenewableClaimExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := &countingDB{DB: testdb.New(t)}
	k := heartbeat.New(db, heartbeat.Config{Timeout: testdb.LongHeartbeat})
	claims := claim(t, db.DB, 2)
	causes := make(chan error, 2)
	// One claim was made long ago, the other just now.
	k.Add(claims[0], time.Now().Add(-2*testdb.LongHeartbeat), func(cause error) { causes <- cause })
	k.Add(claims[1], time.Now(), func(cause error) { t.Errorf("young claim expired: %v", cause) })

	db.mu.Lock()
	db.fail = errors.New("connection refused")
	db.mu.Unlock()
	err := k.Renew(ctx)
	require.ErrorContains(t, err, "connection refused")
	require.ErrorIs(t, <-causes, executor.ErrRenewTimeout)
	require.Equal(t, 1, k.Len(), "the young claim is retried next time")

	db.mu.Lock()
	db.fail = nil
	db.mu.Unlock()
	require.NoError(t, k.Renew(ctx))
	require.Equal(t, 1, k.Len())
}

func TestRunRenewsUntilCanceled(t *testing.T) {
	t.Parallel()
	db := &countingDB{DB: testdb.New(t)}
	// Frequent renewals of a claim that lasts an hour: however slow a
	// renewal (a loaded machine, -race), the claim does not expire.
	k := heartbeat.New(db, heartbeat.Config{Timeout: testdb.LongHeartbeat, Interval: 10 * time.Millisecond})
	c := claim(t, db.DB, 1)[0]
	k.Add(c, time.Now(), func(cause error) { t.Errorf("lost: %v", cause) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- k.Run(ctx) }()
	require.Eventually(t, func() bool {
		db.mu.Lock()
		defer db.mu.Unlock()
		return db.queries >= 3
	}, testdb.Patience, 5*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
}

// A renewal that cannot finish (here, it waits for a table lock) is given
// until the first of its claims would expire: then every claim whose timeout
// has passed is reported expired at once, while the renewal is still
// blocked, and younger claims are kept.
func TestBlockedRenewalExpiresClaimsAtTheirTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	// The first claim expires in a second, the second in an hour (a stall
	// of the machine does not expire it too). Were the renewal given longer
	// than the first claim's timeout (the interval, twenty minutes), the
	// test would time out.
	const timeout = testdb.LongHeartbeat
	k := heartbeat.New(db, heartbeat.Config{Timeout: timeout})
	claims := claim(t, db, 2)
	causes := make(chan error, 2)
	k.Add(claims[0], time.Now().Add(-timeout+time.Second), func(cause error) { causes <- cause })
	k.Add(claims[1], time.Now(), func(cause error) { t.Errorf("young claim expired: %v", cause) })

	locker, err := db.Begin(ctx)
	require.NoError(t, err)
	defer locker.Rollback(ctx) //nolint:errcheck
	_, err = locker.Exec(ctx, `LOCK TABLE corotask.tasks IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)

	renewed := make(chan error, 1)
	go func() { renewed <- k.Renew(ctx) }()
	select {
	case cause := <-causes:
		// Reported while the lock is still held: at the claim's timeout.
		require.ErrorIs(t, cause, executor.ErrRenewTimeout)
	case <-time.After(testdb.Patience):
		t.Fatal("the claim was not reported expired while the renewal was blocked")
	}
	require.ErrorIs(t, <-renewed, context.DeadlineExceeded)
	require.Equal(t, 1, k.Len(), "the young claim is kept")
	require.NoError(t, locker.Rollback(ctx))
	require.NoError(t, k.Renew(ctx))
	require.Equal(t, 1, k.Len())
}

// A keeper with a connection of its own renews while every connection of
// the pool is taken, and opens another connection when its own breaks.
func TestDedicatedConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	admin := testdb.Pool(t, url)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = 1
	cfg.ConnConfig.RuntimeParams["application_name"] = "corotask-test-dedicated"
	var hooks atomic.Int32
	cfg.AfterConnect = func(context.Context, *pgx.Conn) error { hooks.Add(1); return nil }
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	k := heartbeat.NewDedicated(heartbeat.ConnectLike(pool), heartbeat.Config{Timeout: testdb.LongHeartbeat})
	t.Cleanup(k.Close)
	c := claim(t, admin, 1)[0]
	k.Add(c, time.Now(), func(cause error) { t.Errorf("lost: %v", cause) })

	held, err := pool.Acquire(ctx) // the pool's only connection
	require.NoError(t, err)
	defer held.Release()
	beat := func() time.Time {
		var hb time.Time
		require.NoError(t, admin.QueryRow(ctx, `SELECT heartbeat FROM corotask.tasks WHERE task_id = $1`, c.Task).Scan(&hb))
		return hb
	}
	before := beat()
	require.NoError(t, k.Renew(ctx))
	require.True(t, beat().After(before), "renewed")
	require.EqualValues(t, 2, hooks.Load(), "opened as the pool opens its own")

	// Its connection is terminated while it waits (an idle-session killer,
	// a failover, a pooler's restart): the next renewal reconnects at once,
	// rather than fail and wait for the interval after.
	var n int
	require.NoError(t, admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid, $2)) FROM pg_stat_activity
		WHERE application_name = 'corotask-test-dedicated' AND pid <> $1`, held.Conn().PgConn().PID(),
		testdb.Patience.Milliseconds()).Scan(&n))
	require.Equal(t, 1, n)
	before = beat()
	require.NoError(t, k.Renew(ctx), "a renewal on a killed connection failed instead of using a new one")
	require.True(t, beat().After(before), "renewed on a new connection")
	require.EqualValues(t, 3, hooks.Load(), "a new connection, opened as the pool opens its own")
	require.Equal(t, 1, k.Len())
}

func TestRunRefusesAnIntervalNotShorterThanTimeout(t *testing.T) {
	t.Parallel()
	for _, cfg := range []heartbeat.Config{
		{Timeout: time.Second, Interval: time.Second},
		{Timeout: time.Second, Interval: -time.Second},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		k := heartbeat.New(&countingDB{}, cfg)
		require.ErrorContains(t, k.Run(ctx), "must be positive and shorter than Timeout")
		cancel()
	}
}

// Removing a claim leaves a newer claim of the same task kept: the poll that
// held the old one may forget it after the task was claimed again.
func TestRemoveKeepsANewerClaimOfTheTask(t *testing.T) {
	t.Parallel()
	k := heartbeat.New(&countingDB{}, heartbeat.Config{})
	id := tasks.NewID()
	old := heartbeat.Claim{Task: id, Token: [16]byte{1}}
	k.Add(old, time.Now(), func(error) {})
	k.Add(heartbeat.Claim{Task: id, Token: [16]byte{2}}, time.Now(), func(error) {})
	k.Remove(old)
	require.Equal(t, 1, k.Len())
	k.Remove(heartbeat.Claim{Task: id, Token: [16]byte{2}})
	require.Zero(t, k.Len())
}
