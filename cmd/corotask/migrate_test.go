package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	corosql "github.com/corotask/corotask/sql"
	"github.com/corotask/corotask/tasks"
)

func TestMigrate(t *testing.T) {
	t.Parallel()
	migrations, err := corosql.Migrations()
	require.NoError(t, err)
	require.NotEmpty(t, migrations)
	functions, err := corosql.FunctionFiles()
	require.NoError(t, err)
	require.NotEmpty(t, functions)
	var want strings.Builder
	for _, m := range migrations {
		fmt.Fprintf(&want, "applied %s\n", m.Name)
	}
	for _, f := range functions {
		fmt.Fprintf(&want, "applied functions/%s\n", f.Name)
	}
	last := migrations[len(migrations)-1].Version

	c := &cli{t: t, url: testdb.EmptyURL(t)}
	require.Equal(t, want.String(), c.ok("migrate"))
	require.Equal(t, fmt.Sprintf("schema up to date (version %d)\n", last), c.ok("migrate"))
	// The schema works.
	c.create("--type", "t")
	require.Equal(t, 1, c.count())
}

// missingDatabase returns the URL of a database that does not exist on the
// tests' server, dropped when the test ends if the test created it. It is
// named as the tests' databases are, so that a killed run's is swept.
func missingDatabase(t *testing.T) (url, name string) {
	t.Helper()
	admin := testdb.AdminURL(t)
	name = fmt.Sprintf("corotask_test_%d_%s", time.Now().Unix(), strings.ToLower(tasks.NewID().String()))
	t.Cleanup(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, admin)
		require.NoError(t, err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		require.NoError(t, err)
	})
	return testdb.WithDatabase(t, admin, name), name
}

// databaseExists says whether the tests' server has database name.
func databaseExists(t *testing.T, name string) bool {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testdb.AdminURL(t))
	require.NoError(t, err)
	defer conn.Close(ctx)
	var exists bool
	require.NoError(t, conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", name).Scan(&exists))
	return exists
}

// migrate creates the database it is given when it is missing, the local
// default as one named, and says so; the other commands then work on it.
func TestMigrateCreatesAMissingDatabase(t *testing.T) {
	t.Parallel()
	local, name := missingDatabase(t)
	r := runApp(&app{localURL: local, startPrivate: noPrivate(t)}, "migrate")
	require.Equal(t, exitOK, r.code, "%s", r)
	require.Equal(t, "corotask migrate: using "+local+" (the local server)\n", r.using)
	require.True(t, strings.HasPrefix(r.stdout, "created database "+name+"\napplied 0001_"), "%s", r)
	require.True(t, databaseExists(t, name))
	r = runApp(&app{localURL: local, startPrivate: noPrivate(t)}, "ls")
	require.Equal(t, exitOK, r.code, "%s", r)
	r = runApp(&app{localURL: local, startPrivate: noPrivate(t)}, "migrate")
	require.Equal(t, exitOK, r.code, "%s", r)
	require.True(t, strings.HasPrefix(r.stdout, "schema up to date"), "%s", r)

	given, name := missingDatabase(t)
	c := &cli{t: t, url: given}
	require.True(t, strings.HasPrefix(c.ok("migrate"), "created database "+name+"\napplied 0001_"))
	c.create("--type", "t")
	require.Equal(t, 1, c.count())
}

// The other commands, on a database that does not exist, say plainly to run
// migrate, and create nothing.
func TestCommandsOnAMissingDatabaseSayToMigrate(t *testing.T) {
	t.Parallel()
	local, name := missingDatabase(t)
	cfg, err := pgx.ParseConfig(local)
	require.NoError(t, err)
	server := fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
	if strings.HasPrefix(cfg.Host, "/") {
		server = fmt.Sprintf("the socket in %s (port %d)", cfg.Host, cfg.Port)
	}
	want := "database " + name + " does not exist on " + server + ": run 'corotask migrate' first\n"
	id := tasks.NewID().String()
	for _, args := range [][]string{{"ls"}, {"send", id, "1"}, {"show", id}, {"create", "--type", "t"}} {
		r := runApp(&app{localURL: local, startPrivate: noPrivate(t)}, args...)
		requireError(t, r, args[0], want)
		require.Equal(t, "corotask "+args[0]+": "+want, r.stderr)
		require.Equal(t, "corotask "+args[0]+": using "+local+" (the local server)\n", r.using)

		r = runApp(&app{startPrivate: noPrivate(t)}, append([]string{"--database-url", local}, args...)...)
		require.Equal(t, "corotask "+args[0]+": "+want, r.stderr)
	}
	require.False(t, databaseExists(t, name))
}

// migrate --citus on a database without the citus extension changes
// nothing and says what to do first.
func TestMigrateCitusWithoutCitus(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	r := c.run("migrate", "--citus")
	require.Equal(t, exitError, r.code, "%s", r)
	require.Contains(t, r.stderr, "has no citus extension: create it on every node first")
	c.create("--type", "t")
	require.Equal(t, 1, c.count(), "the schema still works")
}

// On a Citus cluster (COROTASK_CITUS_URL), migrate --citus on a database
// distributed already says so and changes nothing; the tables stay
// distributed by root.
func TestMigrateCitusAgain(t *testing.T) {
	t.Parallel()
	db := testdb.Citus(t)
	c := &cli{t: t, url: db.Config().ConnString()}
	out := c.ok("migrate", "--citus")
	require.Contains(t, out, "schema up to date")
	require.Contains(t, out, "distributed over the Citus cluster")
	var column string
	require.NoError(t, db.QueryRow(context.Background(),
		`SELECT column_to_column_name(logicalrelid, partkey) FROM pg_dist_partition WHERE logicalrelid = 'corotask.tasks'::regclass`).Scan(&column))
	require.Equal(t, "root_id", column)
}
