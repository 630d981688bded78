package database_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/database"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// A local server whose database does not exist answers: Find chooses it
// (rather than saying nothing answers, or starting the private cluster), and
// connecting to it fails with an error that says what to run.
func TestFindLocalServerWithoutTheDatabase(t *testing.T) {
	t.Parallel()
	admin := testdb.AdminURL(t)
	// Never created.
	name := fmt.Sprintf("corotask_test_%d_%s", time.Now().Unix(), strings.ToLower(tasks.NewID().String()))
	local := testdb.WithDatabase(t, admin, name)
	got, err := database.Find(t.Context(), database.Options{
		Getenv: func(string) string { return "" },
		Local:  local,
		StartPrivate: func(context.Context) (string, error) {
			t.Error("private cluster started")
			return "", errors.New("not allowed")
		},
	})
	require.NoError(t, err)
	require.Equal(t, database.Target{ConnString: local, Source: database.FromLocal}, got)

	cfg, err := pgx.ParseConfig(local)
	require.NoError(t, err)
	_, err = pgx.ConnectConfig(t.Context(), cfg)
	require.Error(t, err)
	server := fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
	if strings.HasPrefix(cfg.Host, "/") {
		server = fmt.Sprintf("the socket in %s (port %d)", cfg.Host, cfg.Port)
	}
	want := "database " + name + " does not exist on " + server + ": run 'corotask migrate' first"
	require.EqualError(t, database.ConnectError(got.String(), err), want)
	require.Equal(t, want, database.ErrorText(got.Wrap("ls", err)))
}

// The CLI's local default is a database of its own on the server the
// tests' maintenance URL names: not the maintenance database.
func TestLocalURLIsNotTheMaintenanceDatabase(t *testing.T) {
	t.Parallel()
	local, err := pgx.ParseConfig(database.LocalURL)
	require.NoError(t, err)
	maint, err := pgx.ParseConfig(database.LocalMaintenanceURL)
	require.NoError(t, err)
	require.Equal(t, "corotask", local.Database)
	require.Equal(t, "postgres", maint.Database)
	require.Equal(t, maint.Host, local.Host)
	require.Equal(t, maint.Port, local.Port)
	require.Equal(t, maint.User, local.User)
}
