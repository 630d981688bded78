package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// unreachable is a local URL where nothing answers.
const unreachable = "postgres://postgres@127.0.0.1:1/postgres"

// noPrivate fails the test if the CLI starts the private cluster.
func noPrivate(t *testing.T) func(context.Context) (string, error) {
	return func(context.Context) (string, error) {
		t.Error("the private cluster was started")
		return "", errors.New("not allowed")
	}
}

func TestCommandsSayWhichDatabase(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	id := c.create("--type", "t")
	for _, args := range [][]string{
		{"migrate"}, {"create", "--type", "t"}, {"send", id.String(), "1"}, {"ls", "--json"},
		{"show", id.String(), "--json"}, {"tree", id.String()}, {"cancel", id.String()},
	} {
		r := c.run(args...)
		require.Equal(t, exitOK, r.code, "%v: %s", args, r)
		require.Equal(t, "corotask "+args[0]+": using "+c.url+" (from --database-url)\n", r.using, "%v", args)
		require.Empty(t, r.stderr, "%v", args)
		if slices.Contains(args, "--json") {
			require.True(t, json.Valid([]byte(r.stdout)), "%v: stdout is JSON only: %s", args, r.stdout)
		}
	}

	r := runCLI(t, map[string]string{"DATABASE_URL": c.url}, "", "ls")
	require.Equal(t, exitOK, r.code, "%s", r)
	require.Equal(t, "corotask ls: using "+c.url+" (from DATABASE_URL)\n", r.using)

	// The version needs no database and says none.
	r = runCLI(t, nil, "", "version")
	require.Equal(t, exitOK, r.code, "%s", r)
	require.Empty(t, r.using+r.stderr)
}

func TestNoSilentPrivateCluster(t *testing.T) {
	t.Parallel()
	id := tasks.NewID().String()
	for _, args := range [][]string{
		{"migrate"}, {"create", "--type", "t"}, {"send", id, "1"}, {"cancel", id}, {"ls"}, {"show", id}, {"tree", id},
	} {
		r := runApp(&app{localURL: unreachable, startPrivate: noPrivate(t)}, args...)
		requireError(t, r, args[0], "no database: --database-url, DATABASE_URL and libpq's PG* variables are unset, and "+
			unreachable+" does not answer")
		for _, want := range []string{"connection refused", "apt-get install postgresql", "--private-cluster"} {
			require.Contains(t, r.stderr, want, "%v", args)
		}
		require.Empty(t, r.using, "%v", args)
	}
}

func TestPrivateClusterFlag(t *testing.T) {
	t.Parallel()
	u := testdb.URL(t)
	started := 0
	private := func(context.Context) (string, error) { started++; return u, nil }

	// Before or after the command; it wins over the environment.
	env := func(k string) string {
		return map[string]string{"DATABASE_URL": unreachable, "PGHOST": "pghost.invalid"}[k]
	}
	r := runApp(&app{getenv: env, localURL: unreachable, startPrivate: private}, "create", "--type", "t", "--private-cluster")
	require.Equal(t, exitOK, r.code, "%s", r)
	require.Equal(t, "corotask create: using "+u+" (the private cluster)\n", r.using)
	r = runApp(&app{getenv: env, localURL: unreachable, startPrivate: private}, "--private-cluster", "ls", "--json")
	require.Equal(t, exitOK, r.code, "%s", r)
	var listed []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &listed))
	require.Len(t, listed, 1)
	require.Equal(t, 2, started)

	// With --database-url: a usage error, before anything starts.
	for cmd, args := range map[string][]string{
		"ls":      {"ls", "--private-cluster", "--database-url", u},
		"migrate": {"--database-url", u, "migrate", "--private-cluster"},
	} {
		r = runApp(&app{startPrivate: noPrivate(t)}, args...)
		requireUsage(t, r, cmd, "--database-url and --private-cluster exclude each other")
	}

	// A private cluster that cannot be had says why.
	failed := func(context.Context) (string, error) { return "", errors.New("no postgresql server binaries found") }
	r = runApp(&app{startPrivate: failed}, "migrate", "--private-cluster")
	requireError(t, r, "migrate", "no postgresql server binaries found")
}

// TestCLIProcess is the CLI run as a child process by the tests that need
// an environment of their own (libpq's variables, which pgx reads from the
// process's environment).
func TestCLIProcess(t *testing.T) {
	t.Parallel()
	if os.Getenv("COROTASK_CLI_PROCESS") != "1" {
		t.Skip("the CLI process of other tests")
	}
	args := os.Args[slices.Index(os.Args, "--")+1:]
	os.Exit(run(context.Background(), args, os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}

// runProcess runs the CLI as a child process with env (and no DATABASE_URL
// or PG* variable of this process's).
func runProcess(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestCLIProcess$", "--"}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") && !strings.HasPrefix(kv, "DATABASE_URL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "COROTASK_CLI_PROCESS=1")
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return newResult(code, stdout.String(), stderr.String())
}

func TestLibpqEnvironment(t *testing.T) {
	t.Parallel()
	u := testdb.URL(t)
	cfg, err := pgx.ParseConfig(u)
	require.NoError(t, err)
	env := []string{
		"PGHOST=" + cfg.Host, fmt.Sprintf("PGPORT=%d", cfg.Port), "PGUSER=" + cfg.User,
		"PGDATABASE=" + cfg.Database, "PGSSLMODE=disable", "PGCONNECT_TIMEOUT=10",
	}
	if cfg.Password != "" {
		env = append(env, "PGPASSWORD="+cfg.Password)
	}

	r := runProcess(t, env, "create", "--type", "from.env")
	require.Equal(t, exitOK, r.code, "%s", r)
	require.Contains(t, r.using, "corotask create: using postgres://"+cfg.User+"@")
	require.Contains(t, r.using, "/"+cfg.Database+" (from PGCONNECT_TIMEOUT, PGDATABASE, PGHOST, PGPORT, PGSSLMODE, PGUSER)")
	id, err := tasks.ParseID(strings.TrimSpace(r.stdout))
	require.NoError(t, err)
	_, err = tasks.Get(context.Background(), testdb.Pool(t, u), id)
	require.NoError(t, err, "the task is in the database the PG* variables name")

	// DATABASE_URL wins over them.
	r = runProcess(t, append(env, "DATABASE_URL="+unreachable), "ls")
	requireError(t, r, "ls", "cannot connect to "+unreachable+" (from DATABASE_URL)")

	// Variables that are wrong are an error that names them.
	r = runProcess(t, []string{"PGPORT=notaport", "PGPASSWORD=s3cret"}, "ls")
	requireUsage(t, r, "ls", "invalid connection settings: libpq's environment (from PGPASSWORD, PGPORT)")
	require.NotContains(t, r.stderr+r.using, "s3cret")
}

func TestPasswordsMasked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url, want string
		usage     bool
	}{
		{"postgres://u:s3cret@127.0.0.1:1/x", "cannot connect to postgres://u:xxxxx@127.0.0.1:1/x", false},
		{"postgres://u:s3cret@host:notaport/x", "invalid database URL postgres://u:xxxxx@host:notaport/x: invalid port", true},
		{"postgres://u:s3c@ret@127.0.0.1:1/x", "cannot connect to postgres://u:xxxxx@127.0.0.1:1/x", false},
		{"postgres://u:s3c/ret@127.0.0.1:1/x", "invalid database URL postgres://u:xxxxx@127.0.0.1:1/x", true},
		{"postgres://u:s3cret%zz@127.0.0.1:1/x", "invalid database URL postgres://u:xxxxx@127.0.0.1:1/x", true},
		{"host=127.0.0.1 port=1 user=u password=s3cret", "cannot connect to host=127.0.0.1 port=1 user=u password=xxxxx", false},
		{"host=h password='s3 cret' port=abc", "invalid database URL host=h password=xxxxx port=abc", true},
	} {
		for _, r := range []result{
			runCLI(t, nil, "", "ls", "--database-url", tc.url),
			runCLI(t, map[string]string{"DATABASE_URL": tc.url}, "", "send", tasks.NewID().String(), "1"),
		} {
			require.Contains(t, r.stderr, tc.want, "%s", r)
			if tc.usage {
				require.Equal(t, exitUsage, r.code, "%s", r)
			} else {
				require.Equal(t, exitError, r.code, "%s", r)
			}
			require.NotContains(t, r.stdout+r.using+r.stderr, "s3", "%q: %s", tc.url, r)
			require.NotContains(t, r.stdout+r.using+r.stderr, "cret", "%q: %s", tc.url, r)
		}
	}
}

func TestUnknownCommandSuggests(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ typed, want string }{
		{"sned", "send"}, {"snd", "send"}, {"lss", "ls"}, {"mgirate", "migrate"}, {"cancle", "cancel"},
		{"hlep", "help"}, {"Show", "show"}, {"versoin", "version"},
	} {
		r := runCLI(t, nil, "", tc.typed, "x")
		require.Equal(t, exitUsage, r.code, "%s", r)
		require.Contains(t, r.stderr, fmt.Sprintf("corotask: unknown command %q: did you mean %q?", tc.typed, tc.want), "%s", r)
		r = runCLI(t, nil, "", "help", tc.typed)
		require.Equal(t, exitUsage, r.code, "%s", r)
		require.Contains(t, r.stderr, fmt.Sprintf("corotask help: unknown command %q: did you mean %q?", tc.typed, tc.want), "%s", r)
	}
	for _, typed := range []string{"frobnicate", "x", "delete"} {
		r := runCLI(t, nil, "", typed)
		require.Equal(t, exitUsage, r.code, "%s", r)
		require.NotContains(t, r.stderr, "did you mean", "%s", r)
	}
}

func TestEditDistance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"send", "send", 0}, {"sned", "send", 1}, {"snd", "send", 1},
		{"", "ls", 2}, {"kitten", "sitting", 3}, {"ca", "abc", 3},
	} {
		require.Equal(t, tc.want, editDistance(tc.a, tc.b), "%q %q", tc.a, tc.b)
		require.Equal(t, tc.want, editDistance(tc.b, tc.a), "%q %q", tc.b, tc.a)
	}
}

func TestHelpCommand(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"help", "--help"}, {"help", "-h"}, {"help", "help"}, {"help", "send", "--help"}} {
		r := runCLI(t, nil, "", args...)
		require.Equal(t, exitOK, r.code, "%v: %s", args, r)
		require.Empty(t, r.stderr)
		require.True(t, strings.HasPrefix(r.stdout, "Usage: corotask help [COMMAND]\n"), "%v: %s", args, r)
	}
	for _, c := range commands {
		require.Equal(t, runCLI(t, nil, "", c.name, "--help").stdout, runCLI(t, nil, "", "help", c.name).stdout)
	}
	requireUsage(t, runCLI(t, nil, "", "help", "send", "ls"), "help", `unexpected argument "ls": give one COMMAND`)
	requireUsage(t, runCLI(t, nil, "", "help", "--json"), "help", "unknown flag --json")
}

// terminal is a standard input that says it is a terminal.
type terminal struct{ *strings.Reader }

func (terminal) Stat() (fs.FileInfo, error) { return terminalInfo{}, nil }

type terminalInfo struct{}

func (terminalInfo) Name() string       { return "tty" }
func (terminalInfo) Size() int64        { return 0 }
func (terminalInfo) Mode() fs.FileMode  { return fs.ModeDevice | fs.ModeCharDevice | 0o620 }
func (terminalInfo) ModTime() time.Time { return time.Time{} }
func (terminalInfo) IsDir() bool        { return false }
func (terminalInfo) Sys() any           { return nil }

func TestSendSaysItReadsTheTerminal(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	to := c.create("--type", "t")
	const notice = "corotask send: reading the message body (one JSON value) from standard input; end it with Ctrl-D\n"

	for _, args := range [][]string{{to.String()}, {to.String(), "-"}} {
		r := runApp(&app{stdin: terminal{strings.NewReader(`"typed"`)}}, append([]string{"send", "--database-url", c.url}, args...)...)
		require.Equal(t, exitOK, r.code, "%s", r)
		require.Equal(t, notice, r.stderr, "%v", args)
		require.Contains(t, r.using, "corotask send: using ")
		require.Equal(t, "sent message to "+to.String()+"\n", r.stdout)
	}
	require.JSONEq(t, `"typed"`, string(c.show(to).Inbox[0].Body))

	// Not when the body is an argument, nor from a pipe or a file.
	r := runApp(&app{stdin: terminal{strings.NewReader("")}}, "send", "--database-url", c.url, to.String(), "1")
	require.Equal(t, exitOK, r.code, "%s", r)
	require.Empty(t, r.stderr)
	r = c.runIn(`"piped"`, "send", to.String())
	require.Equal(t, exitOK, r.code, "%s", r)
	require.Empty(t, r.stderr)
}

// Errors made outside this package (bench's) are masked and print pgx's
// connection failure once too.
func TestBenchConnectErrorOnce(t *testing.T) {
	t.Parallel()
	r := runCLI(t, nil, "", "bench", "oneshot", "--database-url", "postgres://u:s3cret@127.0.0.1:1/x")
	requireError(t, r, "bench", "postgres://u:xxxxx@127.0.0.1:1/x")
	require.Equal(t, 1, strings.Count(r.stderr, "connection refused"), "%s", r)
	require.NotContains(t, r.stderr+r.using, "s3cret")
}
