package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	_ "github.com/corotask/corotask/internal/testexit" // no race detector pause at exit
	"github.com/corotask/corotask/tasks"
)

// TestMain runs more tests at once than there are CPUs: they spend their time
// waiting for the database and for executors' timers.
func TestMain(m *testing.M) {
	os.Exit(testdb.Main(m, 8))
}

// result is what one run of the CLI did.
type result struct {
	code           int
	stdout, stderr string
	// using is the line that says which database the command used, taken
	// out of stderr; empty when there was none.
	using string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s%s", r.code, r.stdout, r.using, r.stderr)
}

// runCLI runs the CLI in process with the given standard input and
// environment.
func runCLI(t *testing.T, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	return runApp(&app{stdin: strings.NewReader(stdin), getenv: func(k string) string { return env[k] }}, args...)
}

// runApp runs the CLI in process as a, whose outputs it sets.
func runApp(a *app, args ...string) result {
	var stdout, stderr strings.Builder
	a.cmd, a.stdout, a.stderr = "corotask", &stdout, &stderr
	if a.getenv == nil {
		a.getenv = func(string) string { return "" }
	}
	code := a.run(context.Background(), args)
	return newResult(code, stdout.String(), stderr.String())
}

// usingLine matches the line that says which database a command uses.
var usingLine = regexp.MustCompile(`(?m)^corotask [a-z-]+: using .*\n`)

// newResult is the result of a run, with the line that says which database
// it used moved from stderr to using.
func newResult(code int, stdout, stderr string) result {
	return result{code: code, stdout: stdout, stderr: usingLine.ReplaceAllString(stderr, ""),
		using: strings.Join(usingLine.FindAllString(stderr, -1), "")}
}

// cli runs corotask commands against one database, given with
// --database-url.
type cli struct {
	t   *testing.T
	url string
}

// newCLI gives the test a fresh migrated database.
func newCLI(t *testing.T) *cli {
	return &cli{t: t, url: testdb.URL(t)}
}

func (c *cli) run(args ...string) result {
	c.t.Helper()
	return c.runIn("", args...)
}

func (c *cli) runIn(stdin string, args ...string) result {
	c.t.Helper()
	// Right after the command's name: flags and arguments that follow
	// are the test's (which may end with "--").
	full := append([]string{args[0], "--database-url", c.url}, args[1:]...)
	return runCLI(c.t, nil, stdin, full...)
}

// ok runs a command that must succeed and returns its standard output.
func (c *cli) ok(args ...string) string {
	c.t.Helper()
	r := c.run(args...)
	require.Equal(c.t, exitOK, r.code, "%v: %s", args, r)
	require.Empty(c.t, r.stderr, "%v", args)
	return r.stdout
}

// create creates a task with the CLI and returns its ID.
func (c *cli) create(args ...string) tasks.ID {
	c.t.Helper()
	out := c.ok(append([]string{"create"}, args...)...)
	id, err := tasks.ParseID(strings.TrimSpace(out))
	require.NoError(c.t, err, "create printed %q", out)
	return id
}

// show returns what `show --json` says of id.
func (c *cli) show(id tasks.ID) showJSON {
	c.t.Helper()
	var s showJSON
	require.NoError(c.t, json.Unmarshal([]byte(c.ok("show", id.String(), "--json")), &s))
	return s
}

// count returns how many tasks the database holds.
func (c *cli) count() int {
	c.t.Helper()
	var n int
	require.NoError(c.t, testdb.Pool(c.t, c.url).QueryRow(context.Background(),
		"SELECT count(*) FROM corotask.tasks").Scan(&n))
	return n
}

// exec runs SQL on the test's database, to put tasks in states the CLI does
// not make (running, done, failed).
func (c *cli) exec(sql string, args ...any) {
	c.t.Helper()
	_, err := testdb.Pool(c.t, c.url).Exec(context.Background(), sql, args...)
	require.NoError(c.t, err)
}

// requireUsage checks that r is a usage error whose message contains want.
func requireUsage(t *testing.T, r result, cmd, want string) {
	t.Helper()
	require.Equal(t, exitUsage, r.code, "%s", r)
	require.True(t, strings.HasPrefix(r.stderr, "corotask "+cmd+": "), "%s", r)
	require.Contains(t, r.stderr, want, "%s", r)
	require.Empty(t, r.stdout, "%s", r)
}

// requireError checks that r is an error (not a usage error) whose message
// contains want.
func requireError(t *testing.T, r result, cmd, want string) {
	t.Helper()
	require.Equal(t, exitError, r.code, "%s", r)
	require.True(t, strings.HasPrefix(r.stderr, "corotask "+cmd+": "), "%s", r)
	require.Contains(t, r.stderr, want, "%s", r)
	require.Empty(t, r.stdout, "%s", r)
}

func TestMainHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		r := runCLI(t, nil, "", args...)
		require.Equal(t, exitOK, r.code, "%v: %s", args, r)
		require.Empty(t, r.stderr)
		for _, c := range commands {
			require.Contains(t, r.stdout, "\n  "+c.name+" ", "%v lists %s", args, c.name)
		}
		require.Contains(t, r.stdout, "Exit status: 0 on success, 1 on an error, 2 on a usage error.")
	}

	r := runCLI(t, nil, "")
	require.Equal(t, exitUsage, r.code, "no command: %s", r)
	require.Empty(t, r.stdout)
	require.Contains(t, r.stderr, "Usage: corotask")
}

func TestCommandHelp(t *testing.T) {
	t.Parallel()
	for _, c := range commands {
		for _, args := range [][]string{{c.name, "--help"}, {c.name, "-h"}, {"help", c.name}, {c.name, "x", "--help"}} {
			r := runCLI(t, nil, "", args...)
			require.Equal(t, exitOK, r.code, "%v: %s", args, r)
			require.Empty(t, r.stderr)
			require.True(t, strings.HasPrefix(r.stdout, "Usage: corotask "+c.name+" [flags]"), "%v: %s", args, r)
			require.Contains(t, r.stdout, "\nExample:\n  corotask "+c.name)
			if c.noDatabase {
				require.NotContains(t, r.stdout, "--database-url", "%v", args)
				require.NotContains(t, r.stdout, "--private-cluster", "%v", args)
			} else {
				require.Contains(t, r.stdout, "--database-url URL")
				require.Contains(t, r.stdout, "--private-cluster")
			}
		}
	}
}

func TestUnknownCommand(t *testing.T) {
	t.Parallel()
	r := runCLI(t, nil, "", "frobnicate", "x")
	require.Equal(t, exitUsage, r.code, "%s", r)
	require.Contains(t, r.stderr, `corotask: unknown command "frobnicate"`)

	r = runCLI(t, nil, "", "help", "frobnicate")
	require.Equal(t, exitUsage, r.code, "%s", r)
	require.Contains(t, r.stderr, `corotask help: unknown command "frobnicate"`)

	r = runCLI(t, nil, "", "--no-such-flag", "ls")
	require.Equal(t, exitUsage, r.code, "%s", r)
	require.Contains(t, r.stderr, "flag provided but not defined: -no-such-flag")
}

func TestUnknownFlag(t *testing.T) {
	t.Parallel()
	for _, c := range commands {
		r := runCLI(t, nil, "", c.name, "--no-such-flag")
		requireUsage(t, r, c.name, "flag provided but not defined: -no-such-flag")
		require.Contains(t, r.stderr, "Run 'corotask "+c.name+" --help' for usage.")
	}
}

func TestMissingAndExtraArguments(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"send", "show", "tree", "cancel", "history", "retry", "restart", "drop-message"} {
		requireUsage(t, runCLI(t, nil, "", cmd), cmd, "missing TASK argument")
	}
	id := tasks.NewID().String()
	for _, args := range [][]string{
		{"migrate", "x"}, {"create", "--type", "t", "x"}, {"ls", "x"}, {"version", "x"},
		{"show", id, "x"}, {"tree", id, "x"}, {"cancel", id, "x"}, {"send", id, "1", "x"},
		{"history", id, "x"}, {"retry", id, "x"}, {"restart", id, "x"}, {"drop-message", id, "1", "x"},
		{"executors", "x"}, {"stats", "x"},
	} {
		requireUsage(t, runCLI(t, nil, "", args...), args[0], `unexpected argument "x"`)
	}
}

func TestInvalidID(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"send", "not-an-id", "1"},
		{"show", "not-an-id"},
		{"tree", "not-an-id"},
		{"cancel", "not-an-id"},
		{"history", "not-an-id"},
		{"retry", "not-an-id"},
		{"restart", "not-an-id"},
		{"drop-message", "not-an-id", "1"},
		{"ls", "--before", "not-an-id"},
		{"send", tasks.NewID().String(), "1", "--from", "not-an-id"},
		{"create", "--type", "t", "--parent", "not-an-id"},
		{"create", "--type", "t", "--id", "not-an-id"},
		{"ls", "--parent", "not-an-id"},
		{"ls", "--after", "not-an-id"},
	} {
		r := runCLI(t, nil, "", args...)
		requireUsage(t, r, args[0], `invalid task id "not-an-id"`)
	}
	// A ULID with a character outside Crockford's base32.
	r := runCLI(t, nil, "", "show", "01JD7X3M5Q8R9S2T4V6W8Y0ZUU")
	requireUsage(t, r, "show", `invalid task id "01JD7X3M5Q8R9S2T4V6W8Y0ZUU"`)
	// The zero ID names no task.
	r = runCLI(t, nil, "", "cancel", "00000000-0000-0000-0000-000000000000")
	requireUsage(t, r, "cancel", "the zero ID names no task")
}

func TestUnreachableDatabase(t *testing.T) {
	t.Parallel()
	const url = "postgres://u:secret@127.0.0.1:1/x"
	id := tasks.NewID().String()
	for _, args := range [][]string{
		{"migrate"}, {"create", "--type", "t"}, {"send", id, "1"}, {"ls"}, {"show", id}, {"tree", id}, {"cancel", id},
	} {
		// From the flag, before or after the command, and from DATABASE_URL.
		for _, r := range []result{
			runCLI(t, nil, "", append(args, "--database-url", url)...),
			runCLI(t, nil, "", append([]string{"--database-url=" + url}, args...)...),
			runCLI(t, map[string]string{"DATABASE_URL": url}, "", args...),
		} {
			requireError(t, r, args[0], "cannot connect to postgres://u:xxxxx@127.0.0.1:1/x")
			require.Contains(t, r.using, "using postgres://u:xxxxx@127.0.0.1:1/x")
			require.NotContains(t, r.stderr+r.using, "secret", "the password is redacted")
			// pgx's error, which lists each attempt, is printed once.
			require.Equal(t, 1, strings.Count(r.stderr, "connection refused"), "%s", r)
			require.Equal(t, 1, strings.Count(r.stderr, "127.0.0.1:1/x"), "%s", r)
			require.Equal(t, 1, strings.Count(r.stderr, "\n"), "%s", r)
		}
	}
}

func TestInvalidDatabaseURL(t *testing.T) {
	t.Parallel()
	r := runCLI(t, nil, "", "ls", "--database-url", "postgres://u:secret@host:notaport/x")
	requireUsage(t, r, "ls", "invalid database URL postgres://u:xxxxx@host:notaport/x")
	require.NotContains(t, r.stderr, "secret")

	r = runCLI(t, map[string]string{"DATABASE_URL": "host=h password=secret port=abc"}, "", "ls")
	requireUsage(t, r, "ls", "invalid database URL host=h password=xxxxx port=abc")
	require.NotContains(t, r.stderr, "secret")
}

func TestDatabaseURLPrecedence(t *testing.T) {
	t.Parallel()
	good := testdb.URL(t)
	const bad = "postgres://u:secret@127.0.0.1:1/x"
	// The flag wins over DATABASE_URL.
	r := runCLI(t, map[string]string{"DATABASE_URL": bad}, "", "ls", "--database-url", good)
	require.Equal(t, exitOK, r.code, "%s", r)
	// DATABASE_URL is used when there is no flag.
	r = runCLI(t, map[string]string{"DATABASE_URL": good}, "", "ls")
	require.Equal(t, exitOK, r.code, "%s", r)
	require.Equal(t, "no tasks\n", r.stdout)
	// A command's flag wins over the global one.
	r = runCLI(t, nil, "", "--database-url", bad, "ls", "--database-url", good)
	require.Equal(t, exitOK, r.code, "%s", r)
}

func TestSchemaMissing(t *testing.T) {
	t.Parallel()
	url := testdb.EmptyURL(t)
	r := runCLI(t, nil, "", "ls", "--database-url", url)
	requireError(t, r, "ls", "run 'corotask migrate'")
}

func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := runCLI(t, nil, "", args...)
		require.Equal(t, exitOK, r.code, "%s", r)
		require.True(t, strings.HasPrefix(r.stdout, "corotask "), "%s", r)
		require.Contains(t, r.stdout, "go1.")
	}
}

func TestParseArgs(t *testing.T) {
	t.Parallel()
	newFS := func() (*flag.FlagSet, *string, *bool) {
		fs := newFlagSet("t")
		s := fs.String("from", "", "")
		b := fs.Bool("json", false, "")
		return fs, s, b
	}
	for _, tc := range []struct {
		args       []string
		positional []string
		from       string
		json       bool
	}{
		{args: []string{"a", "b"}, positional: []string{"a", "b"}},
		{args: []string{"--from", "x", "a", "b"}, positional: []string{"a", "b"}, from: "x"},
		{args: []string{"a", "--from", "x", "b", "--json"}, positional: []string{"a", "b"}, from: "x", json: true},
		{args: []string{"a", "b", "-from=x", "-json"}, positional: []string{"a", "b"}, from: "x", json: true},
		{args: []string{"a", "-"}, positional: []string{"a", "-"}},
		{args: []string{"--from", "-", "a"}, positional: []string{"a"}, from: "-"},
		{args: []string{"--from", "--json", "a"}, positional: []string{"a"}, from: "--json"},
		{args: []string{"a", "--", "--json", "-5"}, positional: []string{"a", "--json", "-5"}},
		{args: []string{"--json=false", "a"}, positional: []string{"a"}},
	} {
		fs, from, asJSON := newFS()
		pos, err := parseArgs(fs, tc.args)
		require.NoError(t, err, "%q", tc.args)
		require.Equal(t, tc.positional, pos, "%q", tc.args)
		require.Equal(t, tc.from, *from, "%q", tc.args)
		require.Equal(t, tc.json, *asJSON, "%q", tc.args)
	}

	fs, _, _ := newFS()
	_, err := parseArgs(fs, []string{"a", "--from"})
	require.ErrorContains(t, err, "flag needs an argument: -from")
	fs, _, _ = newFS()
	_, err = parseArgs(fs, []string{"a", "--help"})
	require.ErrorIs(t, err, flag.ErrHelp)
}

// TestDocsMatchHelp checks that docs/cli.md shows the help of corotask and
// of every command exactly as the binary prints it.
func TestDocsMatchHelp(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/cli.md")
	require.NoError(t, err)
	doc := string(b)
	r := runCLI(t, nil, "", "help")
	require.Contains(t, doc, "```\n$ corotask help\n"+r.stdout+"```\n", "docs/cli.md shows `corotask help`")
	for _, c := range commands {
		r := runCLI(t, nil, "", c.name, "--help")
		require.Contains(t, doc, "```\n$ corotask "+c.name+" --help\n"+r.stdout+"```\n",
			"docs/cli.md shows `corotask %s --help` as it is", c.name)
	}
}
