package database

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// unreachable is a local URL where nothing answers.
const unreachable = "postgres://postgres@127.0.0.1:1/postgres"

// env returns a Getenv over vars.
func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// noPrivate fails the test if the private cluster is started.
func noPrivate(t *testing.T) func(context.Context) (string, error) {
	return func(context.Context) (string, error) {
		t.Error("private cluster started")
		return "", errors.New("not allowed")
	}
}

func TestFindOrder(t *testing.T) {
	t.Parallel()
	all := map[string]string{"DATABASE_URL": "postgres://env@example.invalid/db", "PGHOST": "pghost.invalid"}
	for _, tc := range []struct {
		name     string
		explicit string
		vars     map[string]string
		want     Target
	}{
		{"flag first", "postgres://flag@example.invalid/db", all,
			Target{ConnString: "postgres://flag@example.invalid/db", Source: FromFlag}},
		{"then DATABASE_URL", "", all,
			Target{ConnString: "postgres://env@example.invalid/db", Source: FromDatabaseURL}},
		{"then libpq environment", "", map[string]string{"PGHOST": "pghost.invalid", "PGUSER": "alice", "PGPASSWORD": "s3cret"},
			Target{ConnString: "", Source: FromLibpqEnv, Env: map[string]string{"PGHOST": "pghost.invalid", "PGUSER": "alice", "PGPASSWORD": "s3cret"}}},
		{"any PG variable", "", map[string]string{"PGSERVICE": "corotask"},
			Target{ConnString: "", Source: FromLibpqEnv, Env: map[string]string{"PGSERVICE": "corotask"}}},
	} {
		got, err := Find(t.Context(), Options{Explicit: tc.explicit, Getenv: env(tc.vars), Local: unreachable, StartPrivate: noPrivate(t)})
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, got, tc.name)
	}
}

func TestFindPrivateModes(t *testing.T) {
	t.Parallel()
	private := func(context.Context) (string, error) { return "private-url", nil }

	// Never: an error that says what was tried and what to do.
	_, err := Find(t.Context(), Options{Getenv: env(nil), Local: "postgres://postgres:s3cret@127.0.0.1:1/postgres", StartPrivate: noPrivate(t)})
	require.ErrorIs(t, err, ErrNoDatabase)
	for _, want := range []string{"--database-url, DATABASE_URL and libpq's PG* variables are unset", "127.0.0.1:1", "connection refused",
		"apt-get install postgresql", "--private-cluster"} {
		require.Contains(t, err.Error(), want)
	}
	require.NotContains(t, err.Error(), "s3cret")

	// Fallback: the private cluster when nothing else answers, not before.
	got, err := Find(t.Context(), Options{Getenv: env(nil), Local: unreachable, Private: PrivateFallback, StartPrivate: private})
	require.NoError(t, err)
	require.Equal(t, Target{ConnString: "private-url", Source: FromPrivate}, got)
	got, err = Find(t.Context(), Options{Getenv: env(map[string]string{"DATABASE_URL": "env-url"}), Private: PrivateFallback, StartPrivate: private})
	require.NoError(t, err)
	require.Equal(t, FromDatabaseURL, got.Source)

	// Only: the private cluster, whatever the environment says.
	got, err = Find(t.Context(), Options{Getenv: env(map[string]string{"DATABASE_URL": "env-url", "PGHOST": "h"}), Private: PrivateOnly, StartPrivate: private})
	require.NoError(t, err)
	require.Equal(t, Target{ConnString: "private-url", Source: FromPrivate}, got)
}

func TestFindReportsPrivateFailure(t *testing.T) {
	t.Parallel()
	failed := func(context.Context) (string, error) { return "", ErrNoPostgres }

	_, err := Find(t.Context(), Options{Getenv: env(nil), Local: "postgres://postgres:secret@127.0.0.1:1/postgres", Private: PrivateFallback, StartPrivate: failed})
	require.ErrorIs(t, err, ErrNoPostgres)
	require.Contains(t, err.Error(), "127.0.0.1:1")
	require.Contains(t, err.Error(), "apt-get install postgresql")
	require.NotContains(t, err.Error(), "secret")
}

func TestTargetStringAndCommand(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		target         Target
		str, cmd, note string
	}{
		{Target{ConnString: "postgres://alice:s3cret@db:5432/app?sslmode=require", Source: FromFlag},
			"postgres://alice:xxxxx@db:5432/app?sslmode=require (from --database-url)",
			"corotask --database-url 'postgres://alice@db:5432/app?sslmode=require'", "PGPASSWORD"},
		{Target{ConnString: "postgres://alice@db/app?password=s3cret", Source: FromFlag},
			"postgres://alice@db/app?password=xxxxx (from --database-url)",
			"corotask --database-url postgres://alice@db/app", "PGPASSWORD"},
		{Target{ConnString: "postgres://alice:s3cret@db/app", Source: FromDatabaseURL},
			"postgres://alice:xxxxx@db/app (from DATABASE_URL)",
			`corotask --database-url "$DATABASE_URL"`, ""},
		{Target{ConnString: "postgres://alice@db/app", Source: FromDatabaseURL},
			"postgres://alice@db/app (from DATABASE_URL)",
			"corotask --database-url postgres://alice@db/app", ""},
		{Target{ConnString: LocalURL, Source: FromLocal},
			LocalURL + " (the local server)",
			"corotask --database-url " + LocalURL, ""},
		{Target{ConnString: "postgres://postgres@/postgres?host=/tmp/x&port=5432", Source: FromPrivate},
			"postgres://postgres@/postgres?host=/tmp/x&port=5432 (the private cluster)",
			"corotask --private-cluster", ""},
		{Target{ConnString: "host=db user=alice password=s3cret", Source: FromFlag},
			"host=db user=alice password=xxxxx (from --database-url)",
			"corotask --database-url 'host=db user=alice'", "PGPASSWORD"},
	} {
		require.Equal(t, tc.str, tc.target.String())
		cmd, note := tc.target.Command()
		require.Equal(t, tc.cmd, cmd)
		if tc.note == "" {
			require.Empty(t, note)
		} else {
			require.Contains(t, note, tc.note)
		}
		require.NotContains(t, tc.target.String()+cmd+note, "s3cret")
	}
}

func TestTargetCommands(t *testing.T) {
	t.Parallel()
	tg := Target{ConnString: "postgres://alice:s3cret@db/app", Source: FromFlag}
	require.Equal(t, "`corotask --database-url postgres://alice@db/app cancel A` and `corotask --database-url postgres://alice@db/app cancel B`"+
		" (the password is not shown: give it in PGPASSWORD or ~/.pgpass)", tg.Commands("cancel A", "cancel B"))
	require.Equal(t, "`corotask --private-cluster cancel A`", Target{ConnString: "x", Source: FromPrivate}.Commands("cancel A"))
}

func TestTargetLibpqEnv(t *testing.T) {
	t.Parallel()
	// pgx reads the process's environment, which this test leaves alone:
	// it checks the names and the command, not the parsed address.
	tg := Target{Source: FromLibpqEnv, Env: map[string]string{"PGHOST": "db.internal", "PGUSER": "alice", "PGPASSWORD": "s3cret", "PGDATABASE": "my app"}}
	require.Contains(t, tg.String(), "(from PGDATABASE, PGHOST, PGPASSWORD, PGUSER)")
	cmd, note := tg.Command()
	require.Equal(t, "PGDATABASE='my app' PGHOST=db.internal PGUSER=alice corotask", cmd)
	require.Contains(t, note, "PGPASSWORD")
	require.NotContains(t, tg.String()+cmd+note, "s3cret")
}

func TestConnectDetailOnce(t *testing.T) {
	t.Parallel()
	_, err := pgx.Connect(t.Context(), "postgres://alice:s3cret@127.0.0.1:1/app?sslmode=prefer")
	require.Error(t, err)
	detail := ConnectDetail(err)
	require.Equal(t, 1, strings.Count(detail, "connection refused"), detail)
	require.NotContains(t, detail, "failed to connect to `user=alice")

	other := fmt.Errorf("connect to postgres://alice:s3cret@127.0.0.1:1/app: %w", err)
	text := ErrorText(other)
	require.Equal(t, "connect to postgres://alice:xxxxx@127.0.0.1:1/app: "+detail, text)
	require.Equal(t, "invalid port in postgres://alice:xxxxx@db:x/app", ErrorText(errors.New("invalid port in postgres://alice:s3cret@db:x/app")))

	wrapped := ConnectError("postgres://alice:xxxxx@127.0.0.1:1/app", err)
	require.ErrorIs(t, wrapped, err)
	require.Equal(t, 1, strings.Count(wrapped.Error(), "127.0.0.1:1/app"), wrapped.Error())
	require.NotContains(t, wrapped.Error(), "s3cret")
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
		{"postgres://alice@db/app?application_name=a@b", "postgres://alice@db/app?application_name=a@b"},
		// URLs that do not parse.
		{"postgres://alice:s3cret@db:bad-port/app", "postgres://alice:xxxxx@db:bad-port/app"},
		{"postgres://alice:s3cret@db:bad-port/app?password=s3cret", "postgres://alice:xxxxx@db:bad-port/app?password=xxxxx"},
		{"postgres://alice:s3cret%zz@db/app", "postgres://alice:xxxxx@db/app"},
		// An unescaped "@" or "/" in the password.
		{"postgres://alice:s3cret@x@db/app", "postgres://alice:xxxxx@db/app"},
		{"postgres://alice:s3cret/x@db/app", "postgres://alice:xxxxx@db/app"},
		{"postgres://alice:s3cret#x@db/app", "postgres://alice:xxxxx@db/app"},
		// Keyword/value strings.
		{"host=db user=alice password=s3cret dbname=app", "host=db user=alice password=xxxxx dbname=app"},
		{"host=db password = 's3cret with space' dbname=app", "host=db password = xxxxx dbname=app"},
		{"host=db PASSWORD=s3cret sslpassword=s3cret", "host=db PASSWORD=xxxxx sslpassword=xxxxx"},
		{"host=db user=alice", "host=db user=alice"},
		// Connection strings inside messages, as pgx and net/url echo them.
		{`parse "postgres://alice:s3cret@x@db/app": net/url: invalid userinfo`, `parse "postgres://alice:xxxxx@db/app": net/url: invalid userinfo`},
		{"cannot parse `host=db password=s3cret port=x`: invalid port", "cannot parse `host=db password=xxxxx port=x`: invalid port"},
		{"cannot connect to postgres://alice:s3cret@db/app: refused", "cannot connect to postgres://alice:xxxxx@db/app: refused"},
		{"run with PGPASSWORD=s3cret set", "run with PGPASSWORD=xxxxx set"},
		{"password authentication failed for user alice", "password authentication failed for user alice"},
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

func TestErrorTextEscapesTerminalControls(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("poll: %w", errors.New("remote said \x1b]52;c;cHduZWQ=\x07 \u202eok\nsecond line"))
	require.Equal(t, `poll: remote said \x1b]52;c;cHduZWQ=\x07 \u202eok`+"\nsecond line", ErrorText(err))
}
