package testdb

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	_ "github.com/corotask/corotask/internal/testexit" // no race detector pause at exit
)

// exists says whether the server has a database called name.
func exists(t *testing.T, name string) bool {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, AdminURL(t))
	require.NoError(t, err)
	defer conn.Close(ctx)
	var ok bool
	require.NoError(t, conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&ok))
	return ok
}

// nameOf returns the database name in the connection string u.
func nameOf(t *testing.T, u string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(u)
	require.NoError(t, err)
	return cfg.Database
}

func TestTxRollsBackAndSurvivesFailedStatements(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table := "testdb_rollback_" + randomSuffix()
	t.Run("in a transaction", func(t *testing.T) {
		tx := Tx(t)
		_, err := tx.Exec(ctx, "CREATE TABLE "+table+" (n int)")
		require.NoError(t, err)
		_, err = tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1/0)")
		require.ErrorContains(t, err, "division by zero")
		// The failed statement did not abort the transaction.
		_, err = tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1), (2)")
		require.NoError(t, err)
		var n int
		require.NoError(t, tx.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n))
		require.Equal(t, 2, n)
		rows, err := tx.Query(ctx, "SELECT n FROM "+table+" ORDER BY n")
		require.NoError(t, err)
		got, err := pgx.CollectRows(rows, pgx.RowTo[int])
		require.NoError(t, err)
		require.Equal(t, []int{1, 2}, got)
		require.ErrorIs(t, tx.QueryRow(ctx, "SELECT n FROM "+table+" WHERE n > 5").Scan(&n), pgx.ErrNoRows)
	})
	pool, err := shared(t)
	require.NoError(t, err)
	var found bool
	require.NoError(t, pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&found))
	require.False(t, found, "the table outlived the test's transaction")
}

func TestLoggerAfterTheTestEnds(t *testing.T) {
	t.Parallel()
	var log interface{ Info(string, ...any) }
	t.Run("logs", func(t *testing.T) {
		l := Logger(t)
		l.Info("during the test", "n", 1)
		log = l
	})
	log.Info("after the test") // dropped: t.Log would panic
}

// The subprocess tests below run this binary again with crashEnv set to say
// how TestCrash ends, and mainEnv set to run it through Main.
const (
	crashEnv = "TESTDB_CRASH"
	mainEnv  = "TESTDB_MAIN"
)

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) != "" {
		os.Exit(Main(m, 4))
	}
	os.Exit(m.Run())
}

// TestCrash is run only as a subprocess: it makes a database, prints its
// name, and ends as crashEnv says.
func TestCrash(t *testing.T) {
	how := os.Getenv(crashEnv)
	if how == "" {
		t.Skip("run by TestDatabasesAreDroppedWhenTestsFail")
	}
	fmt.Printf("database=%s\n", nameOf(t, URL(t)))
	switch how {
	case "fail":
		t.Fatal("failing on purpose")
	case "panic":
		panic("panicking on purpose")
	}
}

// A test that fails or panics still drops its database.
func TestDatabasesAreDroppedWhenTestsFail(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"pass", "fail", "panic", "pass under Main", "fail under Main", "panic under Main"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			how, underMain := strings.CutSuffix(how, " under Main")
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrash$", "-test.v")
			cmd.Env = append(os.Environ(), crashEnv+"="+how)
			if underMain {
				// No lingering at exit under -race: the drops must be done
				// before the process ends.
				cmd.Env = append(cmd.Env, mainEnv+"=1", "GORACE=atexit_sleep_ms=0 "+os.Getenv("GORACE"))
			}
			out, err := cmd.CombinedOutput()
			if how == "pass" {
				require.NoError(t, err, "%s", out)
			} else {
				require.Error(t, err, "%s", out)
			}
			_, after, ok := strings.Cut(string(out), "database=")
			require.True(t, ok, "%s", out)
			name, _, _ := strings.Cut(after, "\n")
			require.True(t, strings.HasPrefix(name, testPrefix), name)
			require.False(t, exists(t, name), "database %s left behind", name)
		})
	}
}

func TestSweepDropsOnlyAbandonedDatabases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := AdminURL(t)
	now := time.Now()
	old := testName(now.Add(-sweepAge - time.Minute))
	young := testName(now.Add(-sweepAge + time.Minute))
	inUse := testName(now.Add(-sweepAge - time.Minute))
	for _, n := range []string{old, young, inUse} {
		require.NoError(t, execAdmin(ctx, admin, "CREATE DATABASE "+n+" TEMPLATE template0"))
		t.Cleanup(func() { _ = execAdmin(context.Background(), admin, "DROP DATABASE IF EXISTS "+n+" WITH (FORCE)") })
	}
	conn, err := pgx.Connect(ctx, onDatabase(admin, inUse))
	require.NoError(t, err)
	defer conn.Close(ctx)

	sweep(ctx, admin, now)
	require.False(t, exists(t, old), "an abandoned database was kept")
	require.True(t, exists(t, young), "a recent database was dropped")
	require.True(t, exists(t, inUse), "a database in use was dropped")
}

func TestCreatedAt(t *testing.T) {
	t.Parallel()
	at := time.Unix(1700000000, 0)
	got, ok := createdAt(testName(at))
	require.True(t, ok)
	require.True(t, at.Equal(got))
	for _, n := range []string{"corotask_test_0123abcd", "corotask_tmpl_x", "corotask_test_x_y", "postgres"} {
		_, ok := createdAt(n)
		require.False(t, ok, n)
	}
}

func TestSweepDropsUnusedTemplates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := AdminURL(t)
	now := time.Now()
	suffix := randomSuffix()
	stale, fresh, unmarked := "corotask_tmpl_stale"+suffix, "corotask_shared_fresh"+suffix, "corotask_tmpl_unmarked"+suffix
	conn, err := pgx.Connect(ctx, admin)
	require.NoError(t, err)
	defer conn.Close(ctx)
	for _, n := range []string{stale, fresh, unmarked} {
		_, err := conn.Exec(ctx, "CREATE DATABASE "+n+" TEMPLATE template0")
		require.NoError(t, err)
		t.Cleanup(func() { _ = execAdmin(context.Background(), admin, "DROP DATABASE IF EXISTS "+n+" WITH (FORCE)") })
	}
	_, err = conn.Exec(ctx, fmt.Sprintf("COMMENT ON DATABASE %s IS '%s%s'", stale, usedPrefix, now.Add(-unusedAge-time.Hour).UTC().Format(time.RFC3339)))
	require.NoError(t, err)
	require.NoError(t, markUsed(ctx, conn, fresh))

	require.NoError(t, sweepUnused(ctx, admin, now))
	require.False(t, exists(t, stale), "a template unused for long was kept")
	require.True(t, exists(t, fresh), "a template in use was dropped")
	require.True(t, exists(t, unmarked), "a template of unknown use was dropped")
}

// The template and the shared database are marked as used by this run.
func TestTemplatesAreMarkedUsed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	Tx(t) // makes or finds both
	hash, err := migrationsHash()
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, AdminURL(t))
	require.NoError(t, err)
	defer conn.Close(ctx)
	for _, n := range []string{"corotask_tmpl_" + hash, "corotask_shared_" + hash} {
		var comment string
		require.NoError(t, conn.QueryRow(ctx, "SELECT coalesce(shobj_description(oid, 'pg_database'), '') FROM pg_database WHERE datname = $1", n).Scan(&comment))
		at, ok := strings.CutPrefix(comment, usedPrefix)
		require.True(t, ok, "%s: %q", n, comment)
		used, err := time.Parse(time.RFC3339, at)
		require.NoError(t, err)
		require.WithinDuration(t, time.Now(), used, 10*time.Minute, n)
	}
}
