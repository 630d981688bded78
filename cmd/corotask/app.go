package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/corotask/corotask/internal/database"
)

// Exit codes.
const (
	exitOK    = 0 // success
	exitError = 1 // the command failed: database unreachable, unknown or ended task, ...
	exitUsage = 2 // the command line is wrong: unknown command, bad flag or argument
)

// commands is the dispatcher table, in the order `corotask help` lists them.
// Adding a subcommand is one line here plus its own file.
var commands = []*command{
	migrateCmd,
	createCmd,
	sendCmd,
	lsCmd,
	showCmd,
	historyCmd,
	treeCmd,
	executorsCmd,
	statsCmd,
	retryCmd,
	restartCmd,
	dropMessageCmd,
	setStateCmd,
	priorityCmd,
	cancelCmd,
	keyWindowCmd,
	pauseCmd,
	resumeCmd,
	limitCmd,
	scheduleCmd,
	uiCmd,
	benchCmd,
	versionCmd,
}

// command is one subcommand.
type command struct {
	name    string // as typed: "send"
	args    string // positional arguments in the synopsis, e.g. "TASK [JSON]"
	summary string // one line for `corotask help`
	help    string // what the command does, for `corotask NAME --help`
	example string // one or more example command lines
	// noDatabase is true for a command that uses no database (version): its
	// help then lists no database flags.
	noDatabase bool
	// anySchema is true for a command that runs on any corotask schema, or
	// none: migrate, which brings the database to this build's. Every other
	// command checks, once connected, that this build runs on the database's
	// schema (see connect), and exits 1 if not.
	anySchema bool
	// createDatabase is true for a command that creates the database it is
	// given when that does not exist (migrate; see connect). Every other
	// command says to run migrate.
	createDatabase bool
	// flags declares the command's own flags on fs (--database-url and --help
	// are declared for every command) and returns the function that runs the
	// command on the positional arguments, once the flags are parsed.
	flags func(fs *flag.FlagSet) runFunc
}

// runFunc runs a command. An error made with usagef exits with exitUsage, any
// other with exitError.
type runFunc func(ctx context.Context, a *app, args []string) error

// app is what a command runs with: its input and outputs, the environment and
// the global flags.
type app struct {
	cmd    string // the command's name, for messages
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	// databaseURL is --database-url, empty when not given.
	databaseURL string
	// privateCluster is --private-cluster.
	privateCluster bool
	// startPrivate starts the private cluster; nil means the one in the
	// user's cache directory. Tests replace it.
	startPrivate func(context.Context) (string, error)
	// localURL is the local server tried last; empty means
	// database.LocalURL. Tests replace it.
	localURL string
	// anySchema and createDatabase are the command's (see command).
	anySchema, createDatabase bool
}

// run is the whole CLI: it parses args (without the program name), runs the
// command and returns the exit code. main calls it with the process's values;
// tests call it in process.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	return (&app{cmd: "corotask", stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv}).run(ctx, args)
}

// run is the package's run on a.
func (a *app) run(ctx context.Context, args []string) int {

	// Global flags, before the command name.
	gfs := newFlagSet("corotask")
	gfs.StringVar(&a.databaseURL, "database-url", "", "")
	gfs.BoolVar(&a.privateCluster, "private-cluster", false, "")
	showVersion := gfs.Bool("version", false, "")
	if err := gfs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printMainHelp(a.stdout)
			return exitOK
		}
		return a.fail(usagef("%v", err))
	}
	if *showVersion {
		fmt.Fprintln(a.stdout, versionString())
		return exitOK
	}
	rest := gfs.Args()
	if len(rest) == 0 {
		printMainHelp(a.stderr)
		return exitUsage
	}
	name, rest := rest[0], rest[1:]
	if name == "help" {
		return a.helpCommand(rest)
	}
	cmd := lookup(name)
	if cmd == nil {
		return a.fail(unknownCommand(name))
	}
	return a.execute(ctx, cmd, rest)
}

// unknownCommand is the usage error for a command that does not exist; it
// suggests the nearest one when one is near.
func unknownCommand(name string) error {
	if near := nearest(name); near != "" {
		return usagef("unknown command %q: did you mean %q? (run 'corotask help' for the list)", name, near)
	}
	return usagef("unknown command %q (run 'corotask help' for the list)", name)
}

// nearest returns the command name (or "help") nearest to name by edit
// distance, counting a swap of two neighbouring letters as one edit, when it
// is at most 2 edits and less than half of name away; else "".
func nearest(name string) string {
	best, bestDist := "", 3
	for _, c := range append(commandNames(), "help") {
		if d := editDistance(strings.ToLower(name), c); d < bestDist && 2*d < max(len(name), len(c)) {
			best, bestDist = c, d
		}
	}
	return best
}

// commandNames returns the names of the commands, in help order.
func commandNames() []string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return names
}

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and swaps of adjacent characters.
func editDistance(a, b string) int {
	r, s := []rune(a), []rune(b)
	d := make([][]int, len(r)+1)
	for i := range d {
		d[i] = make([]int, len(s)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(r); i++ {
		for j := 1; j <= len(s); j++ {
			cost := 1
			if r[i-1] == s[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && r[i-1] == s[j-2] && r[i-2] == s[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(r)][len(s)]
}

// helpCommand is `corotask help [COMMAND]`.
func (a *app) helpCommand(args []string) int {
	a.cmd = "help"
	var names []string
	for _, arg := range args {
		switch arg {
		case "-h", "-help", "--help":
			fmt.Fprint(a.stdout, helpHelp)
			return exitOK
		}
		if strings.HasPrefix(arg, "-") && arg != "-" {
			return a.fail(usagef("unknown flag %s (run 'corotask help --help' for usage)", arg))
		}
		names = append(names, arg)
	}
	if len(names) == 0 {
		printMainHelp(a.stdout)
		return exitOK
	}
	if len(names) > 1 {
		return a.fail(usagef("unexpected argument %q: give one COMMAND", names[1]))
	}
	if names[0] == "help" {
		fmt.Fprint(a.stdout, helpHelp)
		return exitOK
	}
	cmd := lookup(names[0])
	if cmd == nil {
		return a.fail(unknownCommand(names[0]))
	}
	fs, _ := a.flagSet(cmd)
	printCommandHelp(a.stdout, cmd, fs)
	return exitOK
}

// helpHelp is `corotask help --help`.
const helpHelp = `Usage: corotask help [COMMAND]

Print the list of commands and how corotask finds its database or, with
COMMAND, that command's flags and an example (as 'corotask COMMAND --help').

Example:
  corotask help
  corotask help send
`

// lookup returns the command called name, or nil.
func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// newFlagSet returns a FlagSet that reports errors through its return values
// only: the caller prints them.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// Usage of the database flags of every command that uses a database.
const (
	databaseURLUsage    = "the PostgreSQL `URL` (default: $DATABASE_URL, else libpq's PG* variables, else corotask on 127.0.0.1:5432; see 'corotask help')"
	privateClusterUsage = "use the private cluster started from this machine's PostgreSQL binaries instead of a server"
)

// databaseFlags are the flags printCommandHelp lists last.
var databaseFlags = []string{"database-url", "private-cluster"}

// flagSet returns cmd's flags, with the flags every command that uses a
// database has, and the function that runs cmd.
func (a *app) flagSet(cmd *command) (*flag.FlagSet, runFunc) {
	fs := newFlagSet(cmd.name)
	if !cmd.noDatabase {
		fs.StringVar(&a.databaseURL, "database-url", a.databaseURL, databaseURLUsage)
		fs.BoolVar(&a.privateCluster, "private-cluster", a.privateCluster, privateClusterUsage)
	}
	return fs, cmd.flags(fs)
}

// execute parses cmd's flags and arguments and runs it.
func (a *app) execute(ctx context.Context, cmd *command, args []string) int {
	a.cmd, a.anySchema, a.createDatabase = cmd.name, cmd.anySchema, cmd.createDatabase
	fs, runCmd := a.flagSet(cmd)
	positional, err := parseArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		printCommandHelp(a.stdout, cmd, fs)
		return exitOK
	}
	if err != nil {
		return a.fail(usagef("%v", err))
	}
	return a.fail(runCmd(ctx, a, positional))
}

// parseArgs parses args with fs, allowing flags before, between and after the
// positional arguments (the flag package alone stops at the first positional
// one), and returns the positional arguments. Everything after "--" is
// positional; so is "-" (standard input).
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var flags, positional []string
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		if len(arg) < 2 || arg[0] != '-' {
			positional = append(positional, arg)
			continue
		}
		flags = append(flags, arg)
		name := strings.TrimLeft(arg, "-")
		if strings.Contains(name, "=") {
			continue // --name=value
		}
		f := fs.Lookup(name)
		if f == nil {
			continue // fs.Parse reports it (or -h/--help)
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		if i+1 < len(args) { // the flag's value, whatever it looks like
			i++
			flags = append(flags, args[i])
		}
	}
	if err := fs.Parse(flags); err != nil {
		return nil, err
	}
	return positional, nil
}

// usageError is an error in the command line: it exits with exitUsage.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef returns a usage error.
func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// fail prints err, if any, as "corotask CMD: message" and returns the exit
// code for it.
func (a *app) fail(err error) int {
	if err == nil {
		return exitOK
	}
	prefix := "corotask: "
	if a.cmd != "corotask" {
		prefix = "corotask " + a.cmd + ": "
	}
	fmt.Fprintf(a.stderr, "%s%s\n", prefix, database.ErrorText(explain(err)))
	var ue *usageError
	if errors.As(err, &ue) {
		if a.cmd != "corotask" && a.cmd != "help" {
			fmt.Fprintf(a.stderr, "Run 'corotask %s --help' for usage.\n", a.cmd)
		}
		return exitUsage
	}
	return exitError
}

// wantArgs checks the number of positional arguments; names are the
// arguments' names, the optional ones in brackets, e.g. "TASK", "[JSON]".
func wantArgs(args []string, names ...string) error {
	required := 0
	for _, n := range names {
		if !strings.HasPrefix(n, "[") {
			required++
		}
	}
	if len(args) < required {
		return usagef("missing %s argument", names[len(args)])
	}
	if len(args) > len(names) {
		return usagef("unexpected argument %q", args[len(names)])
	}
	return nil
}

// printMainHelp prints `corotask help`.
func printMainHelp(w io.Writer) {
	fmt.Fprint(w, `corotask: durable coroutine-style tasks on PostgreSQL.

Usage: corotask [--database-url URL | --private-cluster] COMMAND [flags] [arguments]

Commands:
`)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	tw.Flush()
	fmt.Fprint(w, `
The database is --database-url, else $DATABASE_URL, else the one libpq's
variables (PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD, PGSERVICE, ...)
name, as for psql, else the database corotask on 127.0.0.1:5432 (user
postgres), where the examples run too; 'corotask migrate' creates it. With
--private-cluster it is instead a private cluster started from this
machine's PostgreSQL binaries, never used unless asked. Each command says on
standard error which database it uses, with the password masked.

Tasks are named by ID, a ULID (26 characters) or a UUID, or by --type and
--key (the live task of that type with that key).
Exit status: 0 on success, 1 on an error, 2 on a usage error.
Run 'corotask COMMAND --help' for a command's flags and an example.
`)
}

// printCommandHelp prints `corotask NAME --help`.
func printCommandHelp(w io.Writer, cmd *command, fs *flag.FlagSet) {
	synopsis := "corotask " + cmd.name + " [flags]"
	if cmd.args != "" {
		synopsis += " " + cmd.args
	}
	fmt.Fprintf(w, "Usage: %s\n\n%s\n\nFlags:\n", synopsis, strings.TrimSpace(cmd.help))
	// The command's own flags by name, then the common ones.
	var own []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if !slices.Contains(databaseFlags, f.Name) {
			own = append(own, f)
		}
	})
	sort.Slice(own, func(i, j int) bool { return own[i].Name < own[j].Name })
	for _, name := range databaseFlags {
		if f := fs.Lookup(name); f != nil {
			own = append(own, f)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	for _, f := range own {
		value, usage := flag.UnquoteUsage(f)
		if value != "" {
			value = " " + value
		}
		fmt.Fprintf(tw, "  --%s%s\t%s\n", f.Name, value, usage)
	}
	fmt.Fprintf(tw, "  --help\tprint this help\n")
	tw.Flush()
	fmt.Fprintf(w, "\nExample:\n")
	for _, line := range strings.Split(strings.TrimSpace(cmd.example), "\n") {
		fmt.Fprintf(w, "  %s\n", line)
	}
}
