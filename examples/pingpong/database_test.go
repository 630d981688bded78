package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// unsetPG unsets libpq's variables for the test.
func unsetPG(t *testing.T) {
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "PG") {
			t.Setenv(name, "") // restored when the test ends
			require.NoError(t, os.Unsetenv(name))
		}
	}
}

func TestFindTargetOrder(t *testing.T) {
	unsetPG(t)
	t.Setenv("DATABASE_URL", "")
	require.Equal(t, target{localURL, fromLocal}, findTarget(""))
	t.Setenv("PGHOST", "db")
	require.Equal(t, target{"", "libpq's PG* variables"}, findTarget(""))
	t.Setenv("DATABASE_URL", "postgres://env@h/d")
	require.Equal(t, target{"postgres://env@h/d", "DATABASE_URL"}, findTarget(""))
	require.Equal(t, target{"postgres://flag@h/d", "--database-url"}, findTarget("postgres://flag@h/d"))
}

func TestTargetHidesPasswords(t *testing.T) {
	t.Parallel()
	tg := target{"postgres://alice:s3cret@db:5432/app?password=s3cret&sslmode=require", "--database-url"}
	require.Equal(t, "postgres://alice:xxxxx@db:5432/app?password=xxxxx&sslmode=require (--database-url)", tg.String())
	cmd, note := tg.Command()
	require.Equal(t, "corotask --database-url 'postgres://alice@db:5432/app?sslmode=require'", cmd)
	require.Contains(t, note, "PGPASSWORD")

	kv := target{"host=db user=alice password='s3 cret' dbname=app", "DATABASE_URL"}
	require.NotContains(t, kv.String(), "s3")
	cmd, _ = kv.Command()
	require.Equal(t, "corotask --database-url 'host=db user=alice dbname=app'", cmd)

	cmd, note = target{localURL, "the local server"}.Command()
	require.Equal(t, "corotask --database-url "+localURL, cmd)
	require.Empty(t, note)
	require.Equal(t, "`corotask --database-url "+localURL+" cancel X` and `corotask --database-url "+localURL+" cancel Y`",
		target{localURL, "the local server"}.Commands("cancel X", "cancel Y"))
}

// When the default server fails, the error says how to give a database.
func TestLocalFailureSaysHowToGiveADatabase(t *testing.T) {
	t.Parallel()
	err := target{localURL, fromLocal}.Wrap("migrate", errors.New("connection refused"))
	require.ErrorContains(t, err, "migrate "+localURL+" (the local server): connection refused\nGive the database with --database-url or DATABASE_URL.")
	require.ErrorContains(t, err, "--private-cluster")
	err = target{"postgres://h/d", "DATABASE_URL"}.Wrap("migrate", errors.New("connection refused"))
	require.EqualError(t, err, "migrate postgres://h/d (DATABASE_URL): connection refused")
}

// Without a database given, the program uses the local server's database
// corotask, created when missing, not the maintenance database postgres.
func TestDefaultIsADatabaseOfItsOwn(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(localURL)
	require.NoError(t, err)
	require.Equal(t, "/"+localDatabase, u.Path)
	require.NotEqual(t, "/postgres", u.Path)
	a, err := url.Parse(localAdminURL)
	require.NoError(t, err)
	require.Equal(t, u.Host, a.Host, "the database is created on the server it is used on")

	// A database given is used as it is: nothing is created (nothing
	// answers there).
	require.NoError(t, target{"postgres://u@127.0.0.1:1/d", "DATABASE_URL"}.ensureDatabase(context.Background()))
}

// createDatabase creates the database once, whoever else creates it at the
// same time.
func TestCreateDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := testdb.AdminURL(t)
	// Named as the tests' databases are, so that one a killed run leaves is
	// swept by a later run.
	name := fmt.Sprintf("corotask_test_%d_%s", time.Now().Unix(), strings.ToLower(tasks.NewID().String()))
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, admin)
		require.NoError(t, err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		require.NoError(t, err)
	})
	created := make([]bool, 4)
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { created[i], errs[i] = createDatabase(ctx, admin, name) })
	}
	wg.Wait()
	n := 0
	for i, err := range errs {
		require.NoError(t, err)
		if created[i] {
			n++
		}
	}
	require.Equal(t, 1, n, "one caller created it")
	again, err := createDatabase(ctx, admin, name)
	require.NoError(t, err)
	require.False(t, again, "it exists: nothing to do")
	conn, err := pgx.Connect(ctx, testdb.WithDatabase(t, admin, name))
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
}
