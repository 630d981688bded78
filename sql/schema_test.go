package sql_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	corosql "github.com/corotask/corotask/sql"
	"github.com/corotask/corotask/tasks"
)

// migrated returns a pool on a fresh database that this build's Migrate
// brought to its schema.
func migrated(t *testing.T) *pgxpool.Pool {
	t.Helper()
	db := testdb.New(t)
	require.NoError(t, corosql.Migrate(context.Background(), db))
	return db
}

// addFutureMigration records, as a newer build's Migrate would, a migration
// past this build's last; compatibleFrom 0 records none (an older
// database's bookkeeping).
func addFutureMigration(t *testing.T, db *pgxpool.Pool, version, compatibleFrom int) {
	t.Helper()
	var from any
	if compatibleFrom > 0 {
		from = compatibleFrom
	}
	_, err := db.Exec(context.Background(), `INSERT INTO corotask.migrations (version, name, checksum, compatible_from)
		VALUES ($1, $2, 'future', $3)`, version, fmt.Sprintf("%04d_future.sql", version), from)
	require.NoError(t, err)
}

func TestCheckSchemaOfThisBuild(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	found, err := corosql.CheckSchema(context.Background(), db)
	require.NoError(t, err)
	build := corosql.BuildSchema()
	require.Equal(t, build.Migration, found.Migration)
	require.Equal(t, build.Functions, found.Functions)
}

func TestCheckSchemaOfAnEmptyDatabase(t *testing.T) {
	t.Parallel()
	db := testdb.Pool(t, testdb.EmptyURL(t))
	found, err := corosql.CheckSchema(context.Background(), db)
	require.ErrorIs(t, err, corosql.ErrSchemaBehind)
	require.Zero(t, found.Migration)
	require.EqualError(t, err, fmt.Sprintf("no corotask schema in this database (this build needs migration %d): run 'corotask migrate' or sql.Migrate with this build",
		corosql.BuildSchema().Migration))
}

func TestCheckSchemaBehindByAMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := migrated(t)
	last := corosql.BuildSchema().Migration
	_, err := db.Exec(ctx, `DELETE FROM corotask.migrations WHERE version = $1`, last)
	require.NoError(t, err)
	_, err = corosql.CheckSchema(ctx, db)
	require.ErrorIs(t, err, corosql.ErrSchemaBehind)
	var se *corosql.SchemaError
	require.ErrorAs(t, err, &se)
	require.Equal(t, last-1, se.Found.Migration)
	require.Equal(t, last, se.Needed.Migration)
	require.EqualError(t, err, fmt.Sprintf("corotask schema at migration %d, this build needs %d: run 'corotask migrate' or sql.Migrate with this build", last-1, last))
}

// Functions of an older release that differ from this build's are behind,
// even when no migration is missing.
func TestCheckSchemaBehindByTheFunctions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := migrated(t)
	build := corosql.BuildSchema()
	_, err := db.Exec(ctx, `UPDATE corotask.function_files SET release = $1 - 1`, build.Functions)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `UPDATE corotask.function_files SET checksum = 'older' WHERE name = 'api.sql'`)
	require.NoError(t, err)
	_, err = corosql.CheckSchema(ctx, db)
	require.ErrorIs(t, err, corosql.ErrSchemaBehind)
	require.EqualError(t, err, fmt.Sprintf("corotask functions at release %d, this build needs %d: run 'corotask migrate' or sql.Migrate with this build",
		build.Functions-1, build.Functions))

	// Migrate puts this build's functions in, and the check passes.
	require.NoError(t, corosql.Migrate(ctx, db))
	_, err = corosql.CheckSchema(ctx, db)
	require.NoError(t, err)
}

// A database migrated before releases were recorded (release 0) whose
// functions are this build's passes: Migrate leaves identical files as
// they are, so it could never be brought past the check otherwise.
func TestCheckSchemaOfFunctionsWithoutARelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := migrated(t)
	_, err := db.Exec(ctx, `UPDATE corotask.function_files SET release = 0`)
	require.NoError(t, err)
	_, err = corosql.CheckSchema(ctx, db)
	require.NoError(t, err)
}

// Newer functions (a newer build's Migrate, with no migration) are fine:
// a release keeps serving the builds before it.
func TestCheckSchemaWithNewerFunctions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := migrated(t)
	_, err := db.Exec(ctx, `UPDATE corotask.function_files SET release = release + 1, checksum = 'newer' WHERE name = 'api.sql'`)
	require.NoError(t, err)
	found, err := corosql.CheckSchema(ctx, db)
	require.NoError(t, err)
	require.Equal(t, corosql.BuildSchema().Functions+1, found.Functions)
}

// A newer build's migration that declares no compatible-from (nor the
// bookkeeping of a build before it was recorded) refuses this build, and so
// does Migrate.
func TestCheckSchemaAheadAndIncompatible(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, from := range []int{0, corosql.BuildSchema().Migration + 1} {
		t.Run(fmt.Sprintf("compatible-from %d", from), func(t *testing.T) {
			t.Parallel()
			db := migrated(t)
			last := corosql.BuildSchema().Migration
			addFutureMigration(t, db, last+1, from)
			_, err := corosql.CheckSchema(ctx, db)
			require.ErrorIs(t, err, corosql.ErrSchemaAhead)
			require.EqualError(t, err, fmt.Sprintf("corotask schema newer than this build (migration %d, this build knows %d; it runs builds from migration %d on): upgrade corotask",
				last+1, last, last+1))

			err = corosql.Migrate(ctx, db)
			require.ErrorIs(t, err, corosql.ErrSchemaAhead)
		})
	}
}

// Newer migrations that all declare this build compatible leave it running:
// CheckSchema passes, and Migrate (which programs often run at start) leaves
// the schema as it is. One that does not is enough to refuse it.
func TestCheckSchemaAheadAndCompatible(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := migrated(t)
	last := corosql.BuildSchema().Migration
	addFutureMigration(t, db, last+1, last)
	addFutureMigration(t, db, last+2, last-1)
	found, err := corosql.CheckSchema(ctx, db)
	require.NoError(t, err)
	require.Equal(t, last+2, found.Migration)
	require.Equal(t, last, found.CompatibleFrom)

	var r corosql.Report
	require.NoError(t, corosql.Migrate(ctx, db, corosql.Reporting(&r)))
	require.Empty(t, r.Migrations)
	require.Equal(t, last+2, r.Version)
	_, err = tasks.Create(ctx, db, tasks.Spec{Type: "works"})
	require.NoError(t, err)

	addFutureMigration(t, db, last+3, last+1)
	_, err = corosql.CheckSchema(ctx, db)
	require.ErrorIs(t, err, corosql.ErrSchemaAhead)
	require.ErrorIs(t, corosql.Migrate(ctx, db), corosql.ErrSchemaAhead)
}

// Migrate records each migration's compatible-from; databases it migrated
// before that (NULL) get theirs at the next Migrate.
func TestMigrateRecordsCompatibleFrom(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := migrated(t)
	_, err := db.Exec(ctx, `UPDATE corotask.migrations SET compatible_from = NULL`)
	require.NoError(t, err)
	require.NoError(t, corosql.Migrate(ctx, db))
	all, err := corosql.Migrations()
	require.NoError(t, err)
	for _, m := range all {
		var from int
		require.NoError(t, db.QueryRow(ctx, `SELECT compatible_from FROM corotask.migrations WHERE version = $1`, m.Version).Scan(&from))
		require.Equal(t, m.CompatibleFrom, from, m.Name)
	}
}

// A role that only uses the schema (no grant on the bookkeeping tables) can
// check it: Migrate grants SELECT on them to PUBLIC.
func TestCheckSchemaAsALeastPrivilegeRole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	admin := testdb.Pool(t, url)
	require.NoError(t, corosql.Migrate(ctx, admin))
	role := "corotask_check_" + strings.ToLower(tasks.NewID().String()[16:])
	_, err := admin.Exec(ctx, `CREATE ROLE `+role+` NOLOGIN; GRANT USAGE ON SCHEMA corotask TO `+role)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP OWNED BY "+role+"; DROP ROLE "+role) })
	conn, err := admin.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, "SET ROLE "+role)
	require.NoError(t, err)
	defer conn.Exec(context.Background(), "RESET ROLE") //nolint:errcheck
	_, err = corosql.CheckSchema(ctx, conn)
	require.NoError(t, err)
}
