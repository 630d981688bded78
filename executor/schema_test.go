package executor_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	corosql "github.com/corotask/corotask/sql"
	"github.com/corotask/corotask/tasks"
)

// schemaDB returns a pool on a fresh database migrated by this build, with a
// ready task of type "job".
func schemaDB(t *testing.T) (*pgxpool.Pool, tasks.ID) {
	t.Helper()
	ctx := context.Background()
	db := testdb.New(t)
	require.NoError(t, corosql.Migrate(ctx, db)) // this build's bookkeeping
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	return db, id
}

// countingPoller registers "job" on e, finishing each poll at once, and
// returns how many polls ran.
func countingPoller(e *executor.Executor, opts ...executor.Option) *atomic.Int32 {
	var polls atomic.Int32
	executor.Register(e, "job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		polls.Add(1)
		return executor.Done(), nil
	}), opts...)
	return &polls
}

// runUntilError runs e and returns Run's error; Run must return by itself.
func runUntilError(t *testing.T, e *executor.Executor) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	select {
	case err := <-done:
		require.Error(t, err, "Run returned nil")
		return err
	case <-time.After(testdb.Patience):
		t.Fatal("Run did not return by itself")
		return nil
	}
}

// An executor on a schema it does not run on claims nothing and polls
// nothing: Run and PollOnce return an error that says what was found, what
// is needed and what to do.
func TestExecutorRefusesASchemaThatDoesNotFit(t *testing.T) {
	t.Parallel()
	build := corosql.BuildSchema()
	cases := []struct {
		name  string
		setup func(t *testing.T, db *pgxpool.Pool)
		is    error
		text  string
	}{
		{"empty database", nil, corosql.ErrSchemaBehind,
			fmt.Sprintf("executor: no corotask schema in this database (this build needs migration %d): run 'corotask migrate' or sql.Migrate with this build", build.Migration)},
		{"behind by a migration", func(t *testing.T, db *pgxpool.Pool) {
			_, err := db.Exec(context.Background(), `DELETE FROM corotask.migrations WHERE version = $1`, build.Migration)
			require.NoError(t, err)
		}, corosql.ErrSchemaBehind,
			fmt.Sprintf("executor: corotask schema at migration %d, this build needs %d: run 'corotask migrate' or sql.Migrate with this build", build.Migration-1, build.Migration)},
		{"behind by the functions", func(t *testing.T, db *pgxpool.Pool) {
			_, err := db.Exec(context.Background(), `UPDATE corotask.function_files SET release = $1 - 1`, build.Functions)
			require.NoError(t, err)
			_, err = db.Exec(context.Background(), `UPDATE corotask.function_files SET checksum = 'older' WHERE name = 'commit.sql'`)
			require.NoError(t, err)
		}, corosql.ErrSchemaBehind,
			fmt.Sprintf("executor: corotask functions at release %d, this build needs %d: run 'corotask migrate' or sql.Migrate with this build", build.Functions-1, build.Functions)},
		{"ahead, incompatible", func(t *testing.T, db *pgxpool.Pool) {
			_, err := db.Exec(context.Background(), `INSERT INTO corotask.migrations (version, name, checksum) VALUES ($1, 'future.sql', 'x')`, build.Migration+1)
			require.NoError(t, err)
		}, corosql.ErrSchemaAhead,
			fmt.Sprintf("executor: corotask schema newer than this build (migration %d, this build knows %d; it runs builds from migration %d on): upgrade corotask", build.Migration+1, build.Migration, build.Migration+1)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var db *pgxpool.Pool
			var id tasks.ID
			if c.setup == nil {
				db = testdb.Pool(t, testdb.EmptyURL(t))
			} else {
				db, id = schemaDB(t)
				c.setup(t, db)
			}
			for _, how := range []string{"Run", "PollOnce"} {
				e := executor.MustNew(db, fastConfig(t))
				polls := countingPoller(e)
				var err error
				if how == "Run" {
					err = runUntilError(t, e)
				} else {
					var n int
					n, err = e.PollOnce(ctx)
					require.Zero(t, n)
				}
				require.ErrorIs(t, err, c.is, how)
				var se *corosql.SchemaError
				require.ErrorAs(t, err, &se, how)
				require.EqualError(t, err, c.text, how)
				require.Zero(t, polls.Load(), how)
			}
			if c.setup != nil {
				task, err := tasks.Get(ctx, db, id)
				require.NoError(t, err)
				require.Contains(t, []tasks.Status{tasks.StatusReady, tasks.StatusUnserved}, task.Status, "never claimed")
				require.Zero(t, task.Failures)
			}
		})
	}
}

// A newer schema whose migrations declare this build compatible runs it.
func TestExecutorRunsOnANewerCompatibleSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, id := schemaDB(t)
	last := corosql.BuildSchema().Migration
	_, err := db.Exec(ctx, `INSERT INTO corotask.migrations (version, name, checksum, compatible_from) VALUES ($1, 'future.sql', 'x', $2)`, last+1, last)
	require.NoError(t, err)

	e := executor.MustNew(db, fastConfig(t))
	polls := countingPoller(e)
	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	waitStatus(t, db, id, tasks.StatusDone)

	id2, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	e2 := executor.MustNew(db, fastConfig(t))
	polls2 := countingPoller(e2)
	start(t, e2)
	waitStatus(t, db, id2, tasks.StatusDone)
	require.Equal(t, int32(1), polls.Load())
	require.Equal(t, int32(1), polls2.Load())
}

// renameFunction renames every overload of corotask.name, as a database the
// build does not fit would lack it.
func renameFunction(db *pgxpool.Pool, name string) error {
	_, err := db.Exec(context.Background(), fmt.Sprintf(`DO $$
		DECLARE f regprocedure;
		BEGIN
			FOR f IN SELECT oid::regprocedure FROM pg_proc WHERE proname = '%s' AND pronamespace = 'corotask'::regnamespace LOOP
				EXECUTE format('ALTER FUNCTION %%s RENAME TO %s_gone', f);
			END LOOP;
		END $$`, name, name))
	return err
}

// A statement of corotask's that fails on the schema (here: its commit, or
// its record of a failure, whose function is gone after the executor
// started) counts nothing against the task, even with MaxFailures(1): the
// claim is given back, and Run stops and returns the error; with the schema
// recorded as behind too, the error is the *sql.SchemaError.
func TestSchemaErrorAtCommitCountsNothing(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		function string // renamed once the poll runs
		pollErr  error  // what the poll returns
		behind   bool   // the bookkeeping says the schema is behind, too
	}{
		{"commit", "commit_polls", nil, false},
		{"commit, schema behind", "commit_polls", nil, true},
		{"failure", "fail_poll", errors.New("boom"), false},
	} {
		for _, how := range []string{"Run", "PollOnce"} {
			t.Run(c.name+", "+how, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				db, id := schemaDB(t)
				var polls atomic.Int32
				var setupErr error // written by the first poll, read once Run or PollOnce returned
				e := executor.MustNew(db, fastConfig(t))
				executor.Register(e, "job", executor.PollerFunc[int, int](func(ctx context.Context, t2 *executor.Task[int, int]) (executor.Action, error) {
					if polls.Add(1) == 1 {
						setupErr = renameFunction(db, c.function)
						if c.behind && setupErr == nil {
							_, setupErr = db.Exec(ctx, `DELETE FROM corotask.migrations WHERE version = $1`, corosql.BuildSchema().Migration)
						}
					}
					return executor.Done(), c.pollErr
				}), executor.MaxFailures(1))
				var err error
				if how == "Run" {
					err = runUntilError(t, e)
				} else {
					_, err = e.PollOnce(ctx)
				}
				require.NoError(t, setupErr)
				if c.behind {
					require.ErrorIs(t, err, corosql.ErrSchemaBehind)
				} else {
					var pgErr *pgconn.PgError
					require.ErrorAs(t, err, &pgErr)
					require.Equal(t, "42883", pgErr.Code)
					require.ErrorContains(t, err, "failed on the database's schema")
				}
				require.Equal(t, int32(1), polls.Load(), "polled once, then stopped")
				task, err := tasks.Get(ctx, db, id)
				require.NoError(t, err)
				require.Zero(t, task.Failures, "nothing counted against the task")
				require.Contains(t, []tasks.Status{tasks.StatusReady, tasks.StatusUnserved}, task.Status, "its claim given back")
			})
		}
	}
}

// An error of class 42 that the user's own OnCommit function returns is the
// poll's: it fails the poll, as any error of it does, and the executor runs
// on.
func TestOnCommitSchemaErrorFailsThePoll(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, id := schemaDB(t)
	e := executor.MustNew(db, fastConfig(t))
	executor.Register(e, "job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		t.OnCommit(func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `SELECT no_such_function()`)
			return err
		})
		return executor.Done(), nil
	}))
	start(t, e)
	task := waitStatus(t, db, id, tasks.StatusRetrying)
	require.Equal(t, 1, task.Failures)
	require.Contains(t, task.LastError, "42883")
	// Still running: it polls the next task.
	id2, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	waitStatus(t, db, id2, tasks.StatusRetrying)
}

// After its connections are lost (a restarted server, a failover to a
// database at another schema), the executor checks the schema again before
// it goes on: it stops, and Run returns the *sql.SchemaError.
func TestExecutorChecksTheSchemaAgainAfterReconnecting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, id := schemaDB(t)
	cfg := fastConfig(t)
	cfg.HeartbeatInterval = 100 * time.Millisecond // renewals soon; the claim lasts an hour
	cfg.ShutdownTimeout = time.Second
	e := executor.MustNew(db, cfg)
	polling := make(chan struct{}, 1)
	executor.Register(e, "job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		select {
		case polling <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return executor.Done(), nil
	}))
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	select {
	case <-polling:
	case err := <-done:
		t.Fatalf("Run returned before polling: %v", err)
	}
	waitFor(t, "a renewal of the claim", func() bool {
		var renewed bool
		require.NoError(t, db.QueryRow(ctx, `SELECT heartbeat > claimed_at FROM corotask.tasks WHERE task_id = $1`, id).Scan(&renewed))
		return renewed
	})
	// The database now says it is behind this build, and every connection
	// to it is cut.
	_, err := db.Exec(ctx, `DELETE FROM corotask.migrations WHERE version = $1`, corosql.BuildSchema().Migration)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	require.NoError(t, err)
	select {
	case err := <-done:
		require.ErrorIs(t, err, corosql.ErrSchemaBehind)
	case <-time.After(testdb.Patience):
		t.Fatal("Run did not stop")
	}
}

// A Run whose context ends while it checks the schema has claimed nothing,
// and stops as any Run does: it returns nil.
func TestRunStoppedBeforeItStartsReturnsNil(t *testing.T) {
	t.Parallel()
	db, _ := schemaDB(t)
	e := executor.MustNew(db, fastConfig(t))
	polls := countingPoller(e)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, e.Run(ctx))
	require.Zero(t, polls.Load())
}

// A Run started while the database cannot be reached (a restart, a
// failover, a pooler whose logins to the server fail) waits for it, as the
// claim loop would, instead of failing at once: it says so once, and
// returns nil when its context ends, having claimed nothing.
func TestRunWaitsForAnUnreachableDatabase(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there now
	pool, err := pgxpool.New(context.Background(), "postgres://postgres@"+addr+"/postgres")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	cfg := fastConfig(t)
	rec := newLineRecorder(cfg.Logger.Handler())
	cfg.Logger = slog.New(rec)
	e := executor.MustNew(pool, cfg)
	polls := countingPoller(e)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	deadline := time.After(testdb.Patience)
	for len(rec.matching("cannot reach the database to check its schema")) == 0 {
		select {
		case err := <-done:
			t.Fatalf("Run returned instead of waiting for the database: %v", err)
		case <-deadline:
			t.Fatal("Run did not say that it waits for the database")
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	require.NoError(t, <-done)
	require.Zero(t, polls.Load())
	require.Len(t, rec.matching("cannot reach the database to check its schema"), 1, "said once")
}
