package corotasktest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/internal/testdb"
)

// NewDB creates a database holding corotask's schema for the test, and
// returns a pool on it; the pool is closed and the database dropped when the
// test ends. Tests that each call it run in parallel without seeing each
// other's tasks. A program under test that connects by itself is given
// pool.Config().ConnString(), the database's URL.
//
// With WithClock, the statements run on the pool read the time from the
// test's Clock (see Clock); a connection the program under test opens by
// itself, from the URL, reads the server's.
//
// It fails the test when no database server can be had (see the package
// documentation for where it looks).
func NewDB(t testing.TB, opts ...DBOption) *pgxpool.Pool {
	t.Helper()
	var o dbOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.clock == nil {
		return testdb.New(t)
	}
	cfg, err := pgxpool.ParseConfig(testdb.URL(t))
	if err != nil {
		t.Fatalf("corotasktest: %v", err)
	}
	cfg.PrepareConn = o.clock.prepareConn
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("corotasktest: open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// DBOption configures NewDB.
type DBOption func(*dbOptions)

type dbOptions struct {
	clock *Clock
}

// WithClock makes every connection of NewDB's pool read the time from c:
// corotask's statements and functions take "now" from corotask.now(), which
// returns the setting corotask.now when one is set, and the pool sets it to
// c.Now() each time it hands out a connection.
func WithClock(c *Clock) DBOption { return func(o *dbOptions) { o.clock = c } }

// prepareConn sets the session's corotask.now to the clock's time, as a
// connection leaves the pool.
func (c *Clock) prepareConn(ctx context.Context, conn *pgx.Conn) (bool, error) {
	_, err := conn.Exec(ctx, query.ClockSet, c.Now().Format(time.RFC3339Nano))
	return err == nil, err
}

// Tx begins a transaction on a database holding corotask's schema, shared by
// the tests of the process, and rolls it back when the test ends: cheaper
// than NewDB, for tests whose writes no other connection must see (client
// calls such as tasks.Create or inbox.Send, OnCommit functions). Each
// statement runs in a savepoint of its own, so that one that fails, as a
// test may expect, does not abort the transaction. Commit fails the test.
func Tx(t testing.TB) pgx.Tx {
	t.Helper()
	return testdb.Tx(t)
}

// Main runs the tests of a package (call it from TestMain:
// os.Exit(corotasktest.Main(m, 8))) and drops the databases of NewDB in the
// background, waiting for the drops before it returns: dropping a database
// takes a checkpoint, and the test's slot goes to the next test meanwhile.
//
// Tests that use a database mostly wait for it: parallel, when positive, is
// how many of them run at once unless -parallel is given (go test's default
// is GOMAXPROCS, which leaves a machine with few CPUs idle).
func Main(m *testing.M, parallel int) int {
	return testdb.Main(m, parallel)
}
