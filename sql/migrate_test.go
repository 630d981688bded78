package sql_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/corotask/corotask/internal/testdb"
	_ "github.com/corotask/corotask/internal/testexit" // no race detector pause at exit
	corosql "github.com/corotask/corotask/sql"
	"github.com/corotask/corotask/tasks"
)

// TestMain runs more tests at once than there are CPUs: they spend their time
// waiting for the database.
func TestMain(m *testing.M) {
	os.Exit(testdb.Main(m, 8))
}

func TestMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Pool(t, testdb.EmptyURL(t))
	all, err := corosql.Migrations()
	require.NoError(t, err)
	require.NotEmpty(t, all)

	functions, err := corosql.FunctionFiles()
	require.NoError(t, err)

	var r corosql.Report
	require.NoError(t, corosql.Migrate(ctx, db, corosql.Reporting(&r)))
	require.Equal(t, all, r.Migrations)
	require.Equal(t, functions, r.Functions)
	require.Equal(t, all[len(all)-1].Version, r.Version)
	require.NoError(t, corosql.Migrate(ctx, db, corosql.Reporting(&r)))
	require.Empty(t, r.Migrations)
	require.Empty(t, r.Functions)
	require.Equal(t, all[len(all)-1].Version, r.Version)

	var n int
	require.NoError(t, db.QueryRow(ctx, "SELECT count(*) FROM corotask.migrations").Scan(&n))
	require.Equal(t, len(all), n)
	_, err = tasks.Create(ctx, db, tasks.Spec{Type: "works"})
	require.NoError(t, err)
}

func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.EmptyURL(t)
	var g errgroup.Group
	for i := 0; i < 8; i++ {
		g.Go(func() error {
			// A pool each, as separate processes would have.
			pool, err := pgxpool.New(ctx, url)
			if err != nil {
				return err
			}
			defer pool.Close()
			return corosql.Migrate(ctx, pool)
		})
	}
	require.NoError(t, g.Wait())
	db := testdb.Pool(t, url)
	var n int
	require.NoError(t, db.QueryRow(ctx, "SELECT count(*) FROM corotask.migrations").Scan(&n))
	all, err := corosql.Migrations()
	require.NoError(t, err)
	require.Equal(t, len(all), n)
}

func TestMigrateRefusesAnEditedMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	_, err := db.Exec(ctx, "UPDATE corotask.migrations SET checksum = 'something else' WHERE version = 1")
	require.NoError(t, err)
	err = corosql.Migrate(ctx, db)
	require.ErrorContains(t, err, "0001_init.sql")
	require.ErrorContains(t, err, "different contents")
}

// An older build (a rolling deploy: it starts after a newer one) keeps the
// newer build's functions rather than putting its own back.
func TestOlderBuildKeepsNewerFunctions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Pool(t, testdb.EmptyURL(t))
	require.NoError(t, corosql.Migrate(ctx, db))
	// What a newer build's Migrate leaves: a changed function, recorded with
	// a later release.
	_, err := db.Exec(ctx, `CREATE OR REPLACE FUNCTION corotask.max_message_bytes() RETURNS integer
		LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT 4194304';
		UPDATE corotask.function_files SET checksum = 'newer', release = release + 1 WHERE name = 'api.sql'`)
	require.NoError(t, err)

	var r corosql.Report
	require.NoError(t, corosql.Migrate(ctx, db, corosql.Reporting(&r)))
	require.Empty(t, r.Functions)
	var limit int
	require.NoError(t, db.QueryRow(ctx, `SELECT corotask.max_message_bytes()`).Scan(&limit))
	require.Equal(t, 4194304, limit, "the newer build's function is kept")
}
