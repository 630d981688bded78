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
	conn, err := connect(ctx, admin)
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

// sweep drops the abandoned test databases of the server at admin, and the
// templates and shared databases unused for longer than unusedAge. It is best
// effort: a database it cannot drop is left for the next run.
func sweep(ctx context.Context, admin string, now time.Time) {
	names, err := abandoned(ctx, admin, now)
	if err == nil {
		for _, n := range names {
			// Without FORCE: a database someone connected to since is kept.
			_ = execAdmin(ctx, admin, fmt.Sprintf("DROP DATABASE IF EXISTS %s", pgx.Identifier{n}.Sanitize()))
		}
	}
	_ = sweepUnused(ctx, admin, now)
}

// unusedAge is how long a template or shared database (one per migration
// set) may go unused before a run drops it. Every test process that uses one
// says so when it starts (markUsed), so only those of migration sets no
// branch has tested for a day go; one dropped is made again when needed.
const unusedAge = 24 * time.Hour

// usedPrefix starts the comment markUsed puts on a template or shared
// database; the time of the last use follows.
const usedPrefix = "corotask test database, last used "

// markUsed records on the database name (a template or shared database) that
// a test process uses it now.
func markUsed(ctx context.Context, conn *pgx.Conn, name string) error {
	comment := usedPrefix + time.Now().UTC().Format(time.RFC3339)
	_, err := conn.Exec(ctx, fmt.Sprintf("COMMENT ON DATABASE %s IS '%s'", pgx.Identifier{name}.Sanitize(), comment))
	if err != nil {
		return fmt.Errorf("mark %s used: %w", name, err)
	}
	return nil
}

// sweepUnused drops the templates and shared databases whose last use is
// older than unusedAge and that nobody is connected to. It holds the lock
// that template and sharedDatabase take, so none is dropped while a process
// looks it up. Those without a mark (made before marks existed) are kept.
func sweepUnused(ctx context.Context, admin string, now time.Time) error {
	conn, err := connect(ctx, admin)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(7261457)"); err != nil {
		return err
	}
	defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock(7261457)") //nolint:errcheck
	rows, err := conn.Query(ctx, `SELECT d.datname, coalesce(shobj_description(d.oid, 'pg_database'), '')
		FROM pg_database d
		WHERE (d.datname LIKE 'corotask\_tmpl\_%' OR d.datname LIKE 'corotask\_shared\_%')
		  AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datname = d.datname)`)
	if err != nil {
		return err
	}
	type db struct{ name, comment string }
	dbs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (db, error) {
		var d db
		return d, r.Scan(&d.name, &d.comment)
	})
	if err != nil {
		return err
	}
	for _, d := range dbs {
		at, ok := strings.CutPrefix(d.comment, usedPrefix)
		if !ok {
			continue
		}
		used, err := time.Parse(time.RFC3339, at)
		if err != nil || now.Sub(used) <= unusedAge {
			continue
		}
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{d.name}.Sanitize())
	}
	return nil
}
