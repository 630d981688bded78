package corotasktest

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/internal/testdb"
)

// NewDB creates a database holding corotask's schema for the test, and
// returns a pool on it; the pool is closed and the database dropped when the
// test ends. Tests that each call it run in parallel without seeing each
// other's tasks. A program under test that connects by itself is given
// pool.Config().ConnString(), the database's URL.
//
// It fails the test when no database server can be had (see the package
// documentation for where it looks).
func NewDB(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return testdb.New(t)
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
