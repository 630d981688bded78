package database

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// privateDir returns a not yet existing data directory in a fresh temporary
// directory and stops any cluster in it at the end of the test.
func privateDir(t *testing.T) string {
	t.Helper()
	return privateDirNamed(t, "pg")
}

// privateDirNamed is privateDir with the data directory's path relative to
// the temporary directory.
func privateDirNamed(t *testing.T, name string) string {
	t.Helper()
	requireBinaries(t)
	tmp := t.TempDir()
	if os.Geteuid() == 0 {
		// t.TempDir makes mode 0700 directories; the postgres OS user that
		// runs the server must be able to enter them.
		require.NoError(t, os.Chmod(tmp, 0o755))
		require.NoError(t, os.Chmod(filepath.Dir(tmp), 0o755))
	}
	dir := filepath.Join(tmp, name)
	// Registered after t.TempDir, so it runs before the directory is removed.
	t.Cleanup(func() { require.NoError(t, StopPrivate(context.Background(), dir)) })
	return dir
}

// requireWorks connects to u with pgx and runs select 1.
func requireWorks(t *testing.T, u string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), u)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var one int
	require.NoError(t, conn.QueryRow(t.Context(), "select 1").Scan(&one))
	require.Equal(t, 1, one)
}

// postmasterPid returns the pid recorded in dir/postmaster.pid.
func postmasterPid(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	require.NoError(t, err)
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(line)
	require.NoError(t, err)
	return pid
}

func TestPrivate(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := privateDir(t)

	u, err := Private(ctx, dir)
	require.NoError(t, err)
	requireWorks(t, u)
	require.FileExists(t, filepath.Join(dir, "PG_VERSION"))
	require.NoDirExists(t, dir+".init")
	pid := postmasterPid(t, dir)

	// Settings: unix socket only, room for many pools.
	pool, err := pgxpool.New(ctx, u)
	require.NoError(t, err)
	var listen, maxConns, user string
	require.NoError(t, pool.QueryRow(ctx, "select current_setting('listen_addresses'), current_setting('max_connections'), current_user").
		Scan(&listen, &maxConns, &user))
	pool.Close()
	require.Empty(t, listen)
	require.Equal(t, "200", maxConns)
	require.Equal(t, "postgres", user)

	if os.Geteuid() == 0 {
		fi, err := os.Stat(dir)
		require.NoError(t, err)
		owner, err := lookupAccount("postgres")
		require.NoError(t, err)
		require.Equal(t, uint32(owner.uid), fi.Sys().(*syscall.Stat_t).Uid)
	}

	// Reuse: same URL, same server.
	u2, err := Private(ctx, dir)
	require.NoError(t, err)
	require.Equal(t, u, u2)
	requireWorks(t, u2)
	require.Equal(t, pid, postmasterPid(t, dir))

	// URL takes a local server that answers.
	failed := func(context.Context) (string, error) { return "", fmt.Errorf("must not be called") }
	got, err := Find(ctx, Options{Getenv: func(string) string { return "" }, Local: u, Private: PrivateFallback, StartPrivate: failed})
	require.NoError(t, err)
	require.Equal(t, Target{ConnString: u, Source: FromLocal}, got)

	// Stop, twice, then start again.
	require.NoError(t, StopPrivate(ctx, dir))
	require.NoFileExists(t, filepath.Join(dir, "postmaster.pid"))
	require.Error(t, ping(ctx, u, readyTimeout))
	require.NoError(t, StopPrivate(ctx, dir))

	u3, err := Private(ctx, dir)
	require.NoError(t, err)
	require.Equal(t, u, u3)
	requireWorks(t, u3)
}

func TestPrivateAfterKill(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := privateDir(t)

	u, err := Private(ctx, dir)
	require.NoError(t, err)
	pidFile := filepath.Join(dir, "postmaster.pid")
	pidText, err := os.ReadFile(pidFile)
	require.NoError(t, err)

	// A killed server leaves postmaster.pid behind (and, for a moment,
	// zombie and orphaned processes).
	require.NoError(t, syscall.Kill(postmasterPid(t, dir), syscall.SIGKILL))
	u2, err := Private(ctx, dir)
	require.NoError(t, err)
	require.Equal(t, u, u2)
	requireWorks(t, u2)

	// A stale postmaster.pid naming a live process that is not the server
	// (as after a reboot that reused the pid).
	require.NoError(t, StopPrivate(ctx, dir))
	_, rest, _ := strings.Cut(string(pidText), "\n")
	require.NoError(t, os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"+rest), 0o600))
	require.NoError(t, StopPrivate(ctx, dir), "must not signal the process named by a stale pid file")
	require.NoFileExists(t, pidFile)

	require.NoError(t, os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"+rest), 0o600))
	u3, err := Private(ctx, dir)
	require.NoError(t, err)
	requireWorks(t, u3)
}

func TestPrivateConcurrent(t *testing.T) {
	t.Parallel()
	dir := privateDir(t)

	const n = 8
	urls := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { urls[i], errs[i] = Private(t.Context(), dir) })
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		require.Equal(t, urls[0], urls[i])
	}
	requireWorks(t, urls[0])
}

func TestPrivateLongPath(t *testing.T) {
	t.Parallel()
	dir := privateDirNamed(t, strings.Repeat("d", 110))
	require.Greater(t, len(dir), maxSocketPath)

	u, err := Private(t.Context(), dir)
	require.NoError(t, err)
	requireWorks(t, u)

	cfg, err := pgx.ParseConfig(u)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(cfg.Host, os.TempDir()), "socket directory %s", cfg.Host)
	require.NoError(t, StopPrivate(t.Context(), dir))
	require.NoError(t, os.RemoveAll(cfg.Host))
}

func TestPrivateRefusesForeignDirectory(t *testing.T) {
	t.Parallel()
	dir := privateDir(t)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "precious.txt"), []byte("keep"), 0o644))

	_, err := Private(t.Context(), dir)
	require.ErrorContains(t, err, "not a postgresql data directory")
	require.FileExists(t, filepath.Join(dir, "precious.txt"))
}

func TestPrivateUnreachableAsRoot(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("only root runs the server as another OS user")
	}
	requireBinaries(t)
	// t.TempDir is mode 0700, so the postgres OS user cannot enter it.
	dir := filepath.Join(t.TempDir(), "pg")
	_, err := Private(t.Context(), dir)
	require.ErrorContains(t, err, "cannot enter")
	require.NoDirExists(t, dir)
}

// PrivateWithSettings starts a cluster with the settings given, and
// RemovePrivate stops it and leaves nothing of it behind.
func TestPrivateWithSettingsAndRemove(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := privateDir(t)
	u, err := PrivateWithSettings(ctx, dir, []string{"work_mem = '7MB'", "autovacuum_naptime = 17"})
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, u)
	require.NoError(t, err)
	var workMem, naptime string
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_setting('work_mem'), current_setting('autovacuum_naptime')").Scan(&workMem, &naptime))
	require.NoError(t, conn.Close(ctx))
	require.Equal(t, "7MB", workMem)
	require.Equal(t, "17s", naptime)

	require.NoError(t, RemovePrivate(ctx, dir))
	_, err = os.Stat(dir)
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = os.Stat(dir + ".lock")
	require.ErrorIs(t, err, os.ErrNotExist)
	require.NoError(t, RemovePrivate(ctx, dir), "removing what is gone is not an error")
}

func TestPrivateWithSettingsRefusesBadSettings(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"autovacuum off", "= on", "work_mem = '1MB'\nlisten_addresses = '*'"} {
		_, err := PrivateWithSettings(t.Context(), filepath.Join(t.TempDir(), "pg"), []string{s})
		require.ErrorContains(t, err, "is not one line of the form name = value", "%q", s)
	}
}
