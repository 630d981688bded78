package testdb

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// testPrefix starts the name of every database made for one test.
const testPrefix = "corotask_test_"

// sweepAge is how old a test database must be, with nobody connected to it,
// for a later run to drop it. A test process normally drops its databases in
// t.Cleanup, even when a test fails or panics; only a process that dies before
// its cleanups run (a -timeout panic, a panic in another goroutine, a kill)
// leaves them. Longer than any test run (CI runs with -timeout 30m), so that
// no database in use is dropped.
const sweepAge = 2 * time.Hour

// testName returns a fresh name for a test database made at now: the time is
// in the name so that a later run can tell an abandoned database from one in
// use.
func testName(now time.Time) string {
	return testPrefix + strconv.FormatInt(now.Unix(), 10) + "_" + randomSuffix()
}

// createdAt returns when the test database name was made, and false when
// name is not a test database's.
func createdAt(name string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(name, testPrefix)
	if !ok {
		return time.Time{}, false
	}
	sec, _, ok := strings.Cut(rest, "_")
	if !ok {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(n, 0), true
}

// abandoned returns the test databases of the server at admin that are older
// than sweepAge at now and have no connection.
func abandoned(ctx context.Context, admin string, now time.Time) ([]string, error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT d.datname FROM pg_database d
		WHERE d.datname LIKE 'corotask\_test\_%'
		  AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datname = d.datname)`)
	if err != nil {
		return nil, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	var old []string
	for _, n := range names {
		if at, ok := createdAt(n); ok && now.Sub(at) > sweepAge {
			old = append(old, n)
		}
	}
	return old, nil
}

// sweep drops the abandoned test databases of the server at admin. It is best
// effort: a database it cannot drop is left for the next run.
func sweep(ctx context.Context, admin string, now time.Time) {
	names, err := abandoned(ctx, admin, now)
	if err != nil {
		return
	}
	for _, n := range names {
		// Without FORCE: a database someone connected to since is kept.
		_ = execAdmin(ctx, admin, fmt.Sprintf("DROP DATABASE IF EXISTS %s", pgx.Identifier{n}.Sanitize()))
	}
}
