package main

import (
	"context"
	"errors"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/database"
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
// corotask, created when missing, not the maintenance database postgres:
// the one the corotask CLI uses by default, so that `corotask ls` shows the
// program's tasks.
func TestDefaultIsTheCLIs(t *testing.T) {
	t.Parallel()
	require.Equal(t, database.LocalURL, localURL)
	u, err := url.Parse(localURL)
	require.NoError(t, err)
	require.NotEqual(t, "/postgres", u.Path)

	// A database given is used as it is: nothing is created (nothing
	// answers there).
	require.NoError(t, target{"postgres://u@127.0.0.1:1/d", "DATABASE_URL"}.ensureDatabase(context.Background()))
}
