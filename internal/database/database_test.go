package database

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestURLPrefersExplicitThenEnv(t *testing.T) {
	// t.Setenv rules out t.Parallel.
	t.Setenv("DATABASE_URL", "postgres://env@example.invalid/db")

	u, err := URL(t.Context(), "postgres://explicit@example.invalid/db")
	require.NoError(t, err)
	require.Equal(t, "postgres://explicit@example.invalid/db", u)

	u, err = URL(t.Context(), "")
	require.NoError(t, err)
	require.Equal(t, "postgres://env@example.invalid/db", u)
}

// unreachable is a local URL where nothing answers.
const unreachable = "postgres://postgres@127.0.0.1:1/postgres"

func TestResolveFallsBackToPrivate(t *testing.T) {
	t.Parallel()
	private := func(context.Context) (string, error) { return "private-url", nil }

	u, err := resolve(t.Context(), "", "", unreachable, private)
	require.NoError(t, err)
	require.Equal(t, "private-url", u)

	u, err = resolve(t.Context(), "", "env-url", unreachable, private)
	require.NoError(t, err)
	require.Equal(t, "env-url", u)
}

func TestResolveReportsPrivateFailure(t *testing.T) {
	t.Parallel()
	failed := func(context.Context) (string, error) { return "", ErrNoPostgres }

	_, err := resolve(t.Context(), "", "", "postgres://postgres:secret@127.0.0.1:1/postgres", failed)
	require.ErrorIs(t, err, ErrNoPostgres)
	require.Contains(t, err.Error(), "127.0.0.1:1")
	require.Contains(t, err.Error(), "apt-get install postgresql")
	require.NotContains(t, err.Error(), "secret")
}

func TestDefaultPrivateDir(t *testing.T) {
	t.Parallel()
	dir, err := DefaultPrivateDir("15")
	require.NoError(t, err)
	if os.Geteuid() == 0 {
		require.Equal(t, "/var/cache/corotask/postgres-15", dir)
	} else {
		cache, err := os.UserCacheDir()
		require.NoError(t, err)
		require.Equal(t, filepath.Join(cache, "corotask", "postgres-15"), dir)
	}

	_, err = DefaultPrivateDir("")
	require.Error(t, err)
	_, err = DefaultPrivateDir("../15")
	require.Error(t, err)
}

func TestRedact(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"postgres://postgres@127.0.0.1:5432/postgres", "postgres://postgres@127.0.0.1:5432/postgres"},
		{"postgres://alice:s3cret@db.example.com:5432/app?sslmode=require", "postgres://alice:xxxxx@db.example.com:5432/app?sslmode=require"},
		{"postgresql://alice:p%40ss%2Fword@db/app", "postgresql://alice:xxxxx@db/app"},
		{"postgres://alice:@db/app", "postgres://alice:xxxxx@db/app"},
		{"postgres://alice@db/app?sslmode=disable&password=s3cret&x=1", "postgres://alice@db/app?sslmode=disable&password=xxxxx&x=1"},
		{"postgres://postgres@/postgres?host=/tmp/sock&port=5432", "postgres://postgres@/postgres?host=/tmp/sock&port=5432"},
		{"postgres://alice:s3cret@db:bad-port/app", "postgres://alice:xxxxx@db:bad-port/app"},
		{"postgres://alice:s3cret@db:bad-port/app?password=s3cret", "postgres://alice:xxxxx@db:bad-port/app?password=xxxxx"},
		{"host=db user=alice password=s3cret dbname=app", "host=db user=alice password=xxxxx dbname=app"},
		{"host=db password = 'with space' dbname=app", "host=db password = xxxxx dbname=app"},
		{"host=db user=alice", "host=db user=alice"},
	} {
		got := Redact(tc.in)
		require.Equal(t, tc.want, got, "Redact(%q)", tc.in)
		require.NotContains(t, got, "s3cret")
	}
}

func TestFindBinariesNone(t *testing.T) {
	t.Parallel()
	_, err := findBinaries("", filepath.Join(t.TempDir(), "*", "bin"))
	require.ErrorIs(t, err, ErrNoPostgres)
	require.Contains(t, err.Error(), "apt-get install postgresql")
	require.Contains(t, err.Error(), "DATABASE_URL")
}

func TestFindBinariesSkipsBrokenWrappers(t *testing.T) {
	t.Parallel()
	real := requireBinaries(t)

	// A PATH directory whose initdb and pg_ctl are scripts that do not
	// behave like PostgreSQL's programs.
	fake := t.TempDir()
	for _, prog := range []string{"initdb", "pg_ctl", "postgres"} {
		script := "#!/bin/sh\necho 'Error: no cluster selected' >&2\nexit 1\n"
		require.NoError(t, os.WriteFile(filepath.Join(fake, prog), []byte(script), 0o755))
	}
	b, err := findBinaries(fake, filepath.Join(filepath.Dir(filepath.Dir(real.dir)), "*", "bin"))
	require.NoError(t, err)
	require.Equal(t, real.dir, b.dir)
	require.Equal(t, real.major, b.major)

	_, err = findBinaries(fake, filepath.Join(t.TempDir(), "*", "bin"))
	require.ErrorIs(t, err, ErrNoPostgres)
	require.Contains(t, err.Error(), fake)
}

func TestFindBinariesFollowsSymlinks(t *testing.T) {
	t.Parallel()
	real := requireBinaries(t)

	// Like /usr/local/bin/initdb -> /usr/lib/postgresql/15/bin/initdb:
	// postgres is not next to the link but next to its target.
	links := t.TempDir()
	for _, prog := range []string{"initdb", "pg_ctl"} {
		require.NoError(t, os.Symlink(filepath.Join(real.dir, prog), filepath.Join(links, prog)))
	}
	b, err := findBinaries(links, filepath.Join(t.TempDir(), "*", "bin"))
	require.NoError(t, err)
	require.Equal(t, real, b)
}

func TestVersionLess(t *testing.T) {
	t.Parallel()
	dirs := []string{"/usr/lib/postgresql/9.6/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/10/bin"}
	require.True(t, versionLess(dirs[0], dirs[2]))
	require.True(t, versionLess(dirs[2], dirs[1]))
	require.False(t, versionLess(dirs[1], dirs[2]))
}

func TestLockFileHonoursContext(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "x.lock")
	unlock, err := lockFile(t.Context(), path)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = lockFile(ctx, path)
	require.ErrorIs(t, err, context.Canceled)

	unlock()
	unlock2, err := lockFile(t.Context(), path)
	require.NoError(t, err)
	unlock2()
}

// requireBinaries returns this machine's PostgreSQL server binaries, skipping
// the test if there are none.
func requireBinaries(t *testing.T) binaries {
	t.Helper()
	b, err := defaultBinaries()
	if errors.Is(err, ErrNoPostgres) {
		t.Skipf("needs PostgreSQL server binaries: %v", err)
	}
	require.NoError(t, err)
	require.True(t, strings.TrimSpace(b.major) != "")
	return b
}
