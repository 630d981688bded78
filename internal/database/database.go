// Package database resolves which PostgreSQL server the examples, the CLI and
// the tests use.
//
// The order is: an explicit URL (the --database-url flag), else $DATABASE_URL,
// else libpq's environment (PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD,
// PGSERVICE, ... as pgx reads them) when any of its variables is set, else
// the database corotask of a server answering on 127.0.0.1:5432 as user
// postgres (the examples' default too), else, when the caller
// allows it, a private cluster started from this machine's PostgreSQL
// binaries (initdb and pg_ctl on PATH or under /usr/lib/postgresql/*/bin).
// The private cluster lives in the user's cache directory (see
// [DefaultPrivateDir]), listens only on a unix socket inside its data
// directory and is reused by later calls and by other processes; start-up is
// serialised with a file lock so that parallel `go test` processes share one
// cluster.
package database

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/corotask/corotask/internal/termsafe"
)

// LocalURL is the database on the conventional local server that [Find]
// tries after the explicit URL and the environment: corotask, the examples'
// default too, so that the CLI sees their tasks. It is a database of its
// own, not the server's maintenance database; `corotask migrate` creates it
// when it is missing (sql.EnsureDatabase), and [ConnectError] says to run
// that when it is.
const LocalURL = "postgres://postgres@127.0.0.1:5432/corotask"

// LocalMaintenanceURL is the maintenance database of [LocalURL]'s server,
// which exists on every server: for callers that want the server rather
// than a database of it, such as the tests, which make their databases
// through it, and [URL].
const LocalMaintenanceURL = "postgres://postgres@127.0.0.1:5432/postgres"

// localProbeTimeout bounds how long [Find] waits for a server on
// 127.0.0.1:5432 to answer.
const localProbeTimeout = 2 * time.Second

// RootCacheDir is the cache directory [DefaultPrivateDir] uses instead of
// os.UserCacheDir when running as root; see there for why.
const RootCacheDir = "/var/cache/corotask"

// ErrNoDatabase is wrapped by the error of [Find] when no database can be had
// and the private cluster was not allowed.
var ErrNoDatabase = errors.New("no database")

// LibpqEnv lists the environment variables of libpq that pgx reads. When any
// of them is set, [Find] connects with an empty connection string, which pgx
// completes from all of them, as psql does.
var LibpqEnv = []string{
	"PGHOST", "PGPORT", "PGDATABASE", "PGUSER", "PGPASSWORD", "PGPASSFILE",
	"PGSERVICE", "PGSERVICEFILE", "PGAPPNAME", "PGCONNECT_TIMEOUT", "PGSSLMODE",
	"PGSSLKEY", "PGSSLCERT", "PGSSLCERTMODE", "PGSSLSNI", "PGSSLROOTCERT",
	"PGSSLPASSWORD", "PGSSLNEGOTIATION", "PGTARGETSESSIONATTRS", "PGTZ",
	"PGOPTIONS", "PGMINPROTOCOLVERSION", "PGMAXPROTOCOLVERSION",
	"PGCHANNELBINDING", "PGREQUIREAUTH",
}

// secretEnv are the variables of LibpqEnv whose values are secrets.
var secretEnv = map[string]bool{"PGPASSWORD": true, "PGSSLPASSWORD": true}

// Source says where a [Target] came from.
type Source int

const (
	FromFlag        Source = iota + 1 // the explicit URL (--database-url)
	FromDatabaseURL                   // $DATABASE_URL
	FromLibpqEnv                      // libpq's PG* environment variables
	FromLocal                         // the server on 127.0.0.1:5432
	FromPrivate                       // the private cluster
)

// PrivateMode says whether [Find] may use the private cluster.
type PrivateMode int

const (
	// PrivateNever never uses the private cluster: when nothing else can be
	// had, Find fails with [ErrNoDatabase]. The CLI's default.
	PrivateNever PrivateMode = iota
	// PrivateFallback uses the private cluster when nothing else can be had:
	// the default of the examples and tests.
	PrivateFallback
	// PrivateOnly uses the private cluster and nothing else (the CLI's
	// --private-cluster).
	PrivateOnly
)

// Options are the inputs of [Find].
type Options struct {
	// Explicit is the URL given on the command line; empty when none.
	Explicit string
	// Private says whether the private cluster may be used.
	Private PrivateMode
	// Getenv reads the environment; nil means os.Getenv. Note that pgx
	// itself reads libpq's variables from the process's environment.
	Getenv func(string) string
	// Local is the local server's URL; empty means [LocalURL].
	Local string
	// StartPrivate starts or reuses the private cluster and returns its URL;
	// nil means the one in [DefaultPrivateDir].
	StartPrivate func(context.Context) (string, error)
}

// Target is the database [Find] chose.
type Target struct {
	// ConnString is the connection string for pgx: a URL, or "" for
	// libpq's environment.
	ConnString string
	Source     Source
	// Env holds the libpq variables that were set (FromLibpqEnv only).
	Env map[string]string
}

// String describes the target for messages, with passwords masked, e.g.
// "postgres://alice:xxxxx@db:5432/app (from --database-url)".
func (t Target) String() string {
	switch t.Source {
	case FromFlag:
		return RedactConnString(t.ConnString) + " (from --database-url)"
	case FromDatabaseURL:
		return RedactConnString(t.ConnString) + " (from DATABASE_URL)"
	case FromLibpqEnv:
		d := describeConfig(t.ConnString)
		if d == "" {
			d = "libpq's environment"
		}
		return d + " (from " + strings.Join(t.envNames(), ", ") + ")"
	case FromLocal:
		return Redact(t.ConnString) + " (the local server)"
	case FromPrivate:
		return Redact(t.ConnString) + " (the private cluster)"
	}
	return Redact(t.ConnString)
}

// envNames returns the names of t.Env, sorted.
func (t Target) envNames() []string {
	names := make([]string, 0, len(t.Env))
	for k := range t.Env {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// Command returns a corotask command line that reaches the same database as
// t, to paste into a shell: "corotask --database-url 'postgres://...'",
// "PGHOST=db PGUSER=alice corotask", "corotask --private-cluster". Passwords
// are never printed: when the database needs one, note says where the
// command expects it (and is empty otherwise).
func (t Target) Command() (cmd, note string) {
	const passNote = "the password is not shown: give it in PGPASSWORD or ~/.pgpass"
	switch t.Source {
	case FromPrivate:
		return "corotask --private-cluster", ""
	case FromDatabaseURL:
		if hasPassword(t.ConnString) {
			return `corotask --database-url "$DATABASE_URL"`, ""
		}
	case FromLibpqEnv:
		var parts []string
		for _, k := range t.envNames() {
			if secretEnv[k] {
				note = passNote
				continue
			}
			parts = append(parts, k+"="+ShellQuote(t.Env[k]))
		}
		return strings.Join(append(parts, "corotask"), " "), note
	}
	u := t.ConnString
	if hasPassword(u) {
		u, note = withoutPassword(u), passNote
	}
	return "corotask --database-url " + ShellQuote(u), note
}

// Commands returns corotask command lines for a message that tells the user
// what to run on t: each of cmds (a command and its arguments, such as
// "cancel 01J...") after [Target.Command]'s prefix, in backquotes, joined
// with " and ", followed by Command's note in parentheses when there is one.
func (t Target) Commands(cmds ...string) string {
	cli, note := t.Command()
	lines := make([]string, len(cmds))
	for i, c := range cmds {
		lines[i] = "`" + cli + " " + c + "`"
	}
	s := strings.Join(lines, " and ")
	if note != "" {
		s += " (" + note + ")"
	}
	return s
}

// ShellQuote quotes s for a POSIX shell when it needs quoting.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:@%+=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// hasPassword says whether the connection string u carries a password.
func hasPassword(u string) bool {
	return Redact(u) != u
}

// withoutPassword returns the URL u without its password (in the user
// information or a password query parameter).
func withoutPassword(u string) string {
	if !strings.Contains(u, "://") {
		return strings.Join(strings.Fields(kvPassword.ReplaceAllString(u, "")), " ")
	}
	p, err := url.Parse(u)
	if err != nil {
		return Redact(u)
	}
	if p.User != nil {
		p.User = url.User(p.User.Username())
	}
	q := p.Query()
	if q.Has("password") {
		q.Del("password")
		p.RawQuery = q.Encode()
	}
	return p.String()
}

// describeConfig returns, as a URL with the password masked, where pgx
// connects with connection string s (which may be "": libpq's environment);
// "" when s does not parse.
func describeConfig(s string) string {
	cfg, err := pgconn.ParseConfig(s)
	if err != nil {
		return ""
	}
	if cfg.Host == "" {
		return ""
	}
	u := url.URL{Scheme: "postgres", Path: "/" + cfg.Database}
	if cfg.Password != "" {
		u.User = url.UserPassword(cfg.User, redacted)
	} else {
		u.User = url.User(cfg.User)
	}
	if strings.HasPrefix(cfg.Host, "/") {
		u.RawQuery = "host=" + cfg.Host + fmt.Sprintf("&port=%d", cfg.Port)
	} else {
		u.Host = fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
	}
	return u.String()
}

// URL returns a connection string to a server to make databases on, as the
// benchmarks do: [Find] with the explicit URL, with [LocalMaintenanceURL]
// for the local server, falling back to the private cluster.
func URL(ctx context.Context, explicit string) (string, error) {
	t, err := Find(ctx, Options{Explicit: explicit, Private: PrivateFallback, Local: LocalMaintenanceURL})
	if err != nil {
		return "", err
	}
	return t.ConnString, nil
}

// Find returns the database to use: opts.Explicit if non-empty, else
// $DATABASE_URL, else libpq's environment if any of [LibpqEnv] is set, else
// [LocalURL] if a server answers there within about two seconds (a server
// that says the database does not exist answers: connecting then fails
// with [ConnectError]'s advice to run `corotask migrate`), else, if
// opts.Private allows it, the private cluster in [DefaultPrivateDir] for the
// installed PostgreSQL version, started if needed (see [Private]).
//
// If none of these can be had, the error says what was tried and how to
// install PostgreSQL; it wraps [ErrNoDatabase], or [ErrNoPostgres] when the
// private cluster was allowed but no server binaries were found.
func Find(ctx context.Context, opts Options) (Target, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	local := opts.Local
	if local == "" {
		local = LocalURL
	}
	private := opts.StartPrivate
	if private == nil {
		private = defaultPrivate
	}

	if opts.Private == PrivateOnly {
		u, err := private(ctx)
		if err != nil {
			return Target{}, err
		}
		return Target{ConnString: u, Source: FromPrivate}, nil
	}
	if opts.Explicit != "" {
		return Target{ConnString: opts.Explicit, Source: FromFlag}, nil
	}
	if env := getenv("DATABASE_URL"); env != "" {
		return Target{ConnString: env, Source: FromDatabaseURL}, nil
	}
	env := map[string]string{}
	for _, k := range LibpqEnv {
		if v := getenv(k); v != "" {
			env[k] = v
		}
	}
	if len(env) > 0 {
		return Target{ConnString: "", Source: FromLibpqEnv, Env: env}, nil
	}
	localErr := ping(ctx, local, localProbeTimeout)
	if localErr == nil || IsMissingDatabase(localErr) {
		return Target{ConnString: local, Source: FromLocal}, nil
	}
	tried := fmt.Sprintf("--database-url, DATABASE_URL and libpq's PG* variables are unset, and %s does not answer (%s)",
		Redact(local), ConnectDetail(localErr))
	if opts.Private == PrivateNever {
		return Target{}, fmt.Errorf("%w: %s; start a PostgreSQL server (install it with `apt-get install postgresql` on Debian/Ubuntu, "+
			"`dnf install postgresql-server` on Fedora, `brew install postgresql` on macOS), pass --database-url or set DATABASE_URL or PGHOST, "+
			"or pass --private-cluster to use a private cluster started from this machine's PostgreSQL binaries", ErrNoDatabase, tried)
	}
	u, err := private(ctx)
	if err != nil {
		return Target{}, fmt.Errorf("%s, and the private cluster failed: %w", tried, err)
	}
	return Target{ConnString: u, Source: FromPrivate}, nil
}

// Wrap returns err, an error of operation op (such as "migrate") on t, naming
// t once: a connection failure becomes [ConnectError], other errors
// "OP TARGET: ERR".
func (t Target) Wrap(op string, err error) error {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return ConnectError(t.String(), err)
	}
	return fmt.Errorf("%s %s: %w", op, t, err)
}

// ConnectError returns the error for a failed connection to target (as
// [Target.String] or [Redact] describe it): "cannot connect to TARGET:
// DETAIL", where DETAIL is [ConnectDetail] of err; or, when the server said
// the database does not exist, what to do: "database corotask does not
// exist on 127.0.0.1:5432: run 'corotask migrate' first". It wraps err.
func ConnectError(target string, err error) error {
	return &connectError{target: target, err: err}
}

type connectError struct {
	target string
	err    error
}

func (e *connectError) Error() string {
	if missing := missingDatabase(e.err); missing != "" {
		return missing
	}
	return "cannot connect to " + e.target + ": " + ConnectDetail(e.err)
}

// codeInvalidCatalogName is PostgreSQL's error for connecting to a database
// that does not exist.
const codeInvalidCatalogName = "3D000"

// IsMissingDatabase says whether err is the server's refusal of a
// connection to a database that does not exist (invalid_catalog_name).
func IsMissingDatabase(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == codeInvalidCatalogName
}

// missingDatabase returns, for a connection of pgx refused because its
// database does not exist, what to do: "database corotask does not exist on
// 127.0.0.1:5432: run 'corotask migrate' first" (migrate creates it); ""
// for any other error.
func missingDatabase(err error) string {
	var ce *pgconn.ConnectError
	if !IsMissingDatabase(err) || !errors.As(err, &ce) || ce.Config == nil {
		return ""
	}
	server := fmt.Sprintf("%s:%d", ce.Config.Host, ce.Config.Port)
	if strings.HasPrefix(ce.Config.Host, "/") {
		server = fmt.Sprintf("the socket in %s (port %d)", ce.Config.Host, ce.Config.Port)
	}
	return fmt.Sprintf("database %s does not exist on %s: run 'corotask migrate' first", ce.Config.Database, server)
}

func (e *connectError) Unwrap() error { return e.err }

// ErrorText returns the message of err to print: masked with [Redact], with
// a connection failure of pgx that err holds (and that [ConnectError] did not
// already shorten) reduced to [ConnectDetail], so that each attempt's failure
// is printed once, and with the characters a terminal acts on escaped (see
// termsafe): an error may quote what the database holds.
func ErrorText(err error) string {
	msg := err.Error()
	var ours *connectError
	var ce *pgconn.ConnectError
	if !errors.As(err, &ours) && errors.As(err, &ce) {
		msg = strings.Replace(msg, ce.Error(), ConnectDetail(ce), 1)
	}
	// pgx quotes a keyword/value string that does not parse with only the
	// first word of a password holding a space masked, and may name another.
	var secrets []string
	for _, q := range quoted.FindAllString(msg, -1) {
		_, s := redactKV(strings.Trim(q, "`"))
		secrets = append(secrets, s...)
	}
	return termsafe.Text(Redact(maskWords(msg, secrets)))
}

// ConnectDetail returns the message of a connection error of pgx once: pgx
// repeats the user and database (which the caller names already) and lists
// every attempt, often the same failure twice (with and without TLS). The
// result keeps each distinct attempt's failure, joined with "; ", with
// passwords masked.
func ConnectDetail(err error) string {
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) || errors.Unwrap(ce) == nil {
		return Redact(err.Error())
	}
	inner := errors.Unwrap(ce)
	var attempts []error
	if j, ok := inner.(interface{ Unwrap() []error }); ok {
		attempts = j.Unwrap()
	} else {
		attempts = []error{inner}
	}
	var msgs []string
	seen := map[string]bool{}
	for _, a := range attempts {
		m := a.Error()
		if !seen[m] {
			seen[m] = true
			msgs = append(msgs, m)
		}
	}
	return maskConfig(Redact(strings.Join(msgs, "; ")), ce.Config)
}

// maskConfig masks in msg, an error of pgx connecting with cfg, what may be
// a password that the connection string did not parse as one: pgx takes
// "alice:pa@ss@db" for the user alice, the password "pa" and the host
// "ss@db", and quotes that host in its errors ("lookup ss@db: no such
// host"). The part of such a host before its last "@" is masked, with a hint
// on percent-encoding; so is the password, wherever it appears.
func maskConfig(msg string, cfg *pgconn.Config) string {
	if cfg == nil {
		return msg
	}
	var hint bool
	for _, h := range append([]string{cfg.Host}, fallbackHosts(cfg)...) {
		if at := strings.LastIndex(h, "@"); at > 0 {
			msg = strings.ReplaceAll(msg, h[:at], redacted)
			hint = true
		}
	}
	// A password shorter than this is left: masking each of its occurrences
	// would mask words of the message (and it is not worth much).
	const minMasked = 4
	if len(cfg.Password) >= minMasked {
		msg = strings.ReplaceAll(msg, cfg.Password, redacted)
	}
	if hint {
		msg += " (a URL's password holding @, #, /, ? or % must be percent-encoded: %40, %23, %2F, %3F, %25)"
	}
	return msg
}

// fallbackHosts returns the hosts of cfg's fallbacks.
func fallbackHosts(cfg *pgconn.Config) []string {
	hosts := make([]string, 0, len(cfg.Fallbacks))
	for _, f := range cfg.Fallbacks {
		hosts = append(hosts, f.Host)
	}
	return hosts
}

// validSchemes are the URL schemes pgx (and libpq) accept.
var validSchemes = []string{"postgres", "postgresql"}

// mistypedScheme matches the start of a URL whose "://" is mistyped:
// "postgres//", "postgres:/x", "postgres:x" (but not "host=...").
var mistypedScheme = regexp.MustCompile(`^(postgres|postgresql)(//|:/[^/]|:[^/])`)

// InvalidReason says why connection string s did not parse, given pgx's
// error err, without quoting s (which may hold a password): "unknown scheme
// postgress: use postgres:// or postgresql://", "the scheme must be followed
// by ://", or pgx's reason, with any password masked.
func InvalidReason(s string, err error) string {
	if scheme, _, ok := strings.Cut(s, "://"); ok && !strings.ContainsAny(scheme, " =") {
		if !slices.Contains(validSchemes, strings.ToLower(scheme)) {
			return fmt.Sprintf("unknown scheme %s: use postgres:// or postgresql://", termsafe.Line(Redact(scheme)))
		}
	}
	if m := mistypedScheme.FindStringSubmatch(strings.ToLower(s)); m != nil {
		return fmt.Sprintf("the scheme %s must be followed by :// (postgres://USER:PASSWORD@HOST:PORT/DATABASE)", m[1])
	}
	reason := err.Error()
	// pgx's message quotes the string (with the password it found masked):
	// only the reason after it is kept. It may quote a word of a password
	// holding a space ("missing = after ..."): each is masked.
	if _, after, ok := strings.Cut(reason, "`: "); ok {
		reason = after
	}
	_, secrets := redactKV(s)
	return Redact(maskWords(reason, secrets))
}

// maskWords masks in msg each word of secrets (passwords holding spaces)
// but the shortest, whose masking would mask words of the message.
func maskWords(msg string, secrets []string) string {
	for _, secret := range secrets {
		for _, word := range strings.Fields(secret) {
			if len(word) >= 3 {
				msg = strings.ReplaceAll(msg, word, redacted)
			}
		}
	}
	return msg
}

// quoted matches what pgx quotes of a connection string in its errors.
var quoted = regexp.MustCompile("`[^`]*`")

// defaultPrivate starts or reuses the private cluster in DefaultPrivateDir.
func defaultPrivate(ctx context.Context) (string, error) {
	bin, err := defaultBinaries()
	if err != nil {
		return "", err
	}
	dir, err := DefaultPrivateDir(bin.major)
	if err != nil {
		return "", err
	}
	return Private(ctx, dir)
}

// DefaultPrivateDir returns the data directory of the private cluster for
// PostgreSQL major version version (such as "15"): os.UserCacheDir()/corotask/postgres-<version>.
// The version is part of the name because a data directory can only be used
// by the major version that created it.
//
// When running as root it returns [RootCacheDir]/postgres-<version> instead:
// PostgreSQL refuses to run as root, so the server then runs as the postgres
// OS user, which cannot enter root's home directory (/root is mode 0700) and
// hence could not use a cluster under /root/.cache.
func DefaultPrivateDir(version string) (string, error) {
	if version == "" || strings.ContainsAny(version, `/\`) {
		return "", fmt.Errorf("invalid postgresql version %q for the private cluster directory", version)
	}
	name := "postgres-" + version
	if os.Geteuid() == 0 {
		return filepath.Join(RootCacheDir, name), nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find cache directory for the private cluster: %w", err)
	}
	return filepath.Join(cache, "corotask", name), nil
}

// ping connects to u and runs "select 1", giving up after timeout.
func ping(ctx context.Context, u string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		return err
	}
	cfg.ConnectTimeout = timeout
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var one int
	if err := conn.QueryRow(ctx, "select 1").Scan(&one); err != nil {
		return err
	}
	if one != 1 {
		return errors.New("select 1 did not return 1")
	}
	return nil
}

// redacted replaces passwords in Redact.
const redacted = "xxxxx"

var (
	// userinfoPassword matches the password of "scheme://user:password@" in
	// text, up to the last "@" of the word, so that a password with an
	// unescaped "@" is masked whole.
	userinfoPassword = regexp.MustCompile("([a-zA-Z][a-zA-Z0-9+.-]*://[^:/?#@\\s\"'`]*:)[^\\s\"'`]*@")
	// mistypedUserinfoPassword matches the password of a URL whose scheme
	// is mistyped ("postgres//user:password@", "postgres:/user:...",
	// "postgres:user:...@"), and of "user:password@host" without a scheme.
	mistypedUserinfoPassword = regexp.MustCompile("(\\b[a-zA-Z][a-zA-Z0-9+.-]*(?:/{1,3}|:/?)[^:/?#@\\s\"'`]*:)[^\\s\"'`]*@")
	schemelessPassword       = regexp.MustCompile("((?:^|[\\s\"'`(=])[^\\s:/@\"'`(=]+:)[^\\s\"'`/]*@")
	// kvPassword matches password=..., sslpassword=... and PGPASSWORD=...,
	// in keyword/value connection strings, URL queries and error messages.
	kvPassword = regexp.MustCompile(`(?i)(\b(?:ssl|pg)?password\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s&'"` + "`" + `]*)`)
)

// kvPasswordKey matches the password keywords of a keyword/value string,
// and kvNextKey the keyword after a value.
var (
	kvPasswordKey = regexp.MustCompile(`(?i)(?:^|\s)(?:ssl)?password\s*=\s*`)
	kvNextKey     = regexp.MustCompile(`\s+[A-Za-z_]+\s*=`)
)

// RedactConnString returns connection string s (as given: it may not parse)
// with its passwords masked: [Redact], and in a keyword/value string an
// unquoted password holding spaces (which does not parse) is masked up to
// the next keyword, not only to its first space.
func RedactConnString(s string) string {
	masked, _ := redactKV(s)
	return masked
}

// redactKV returns RedactConnString(s) and the unquoted passwords it
// masked in a keyword/value string.
func redactKV(s string) (string, []string) {
	if strings.Contains(s, "://") {
		return Redact(s), nil
	}
	var b strings.Builder
	var secrets []string
	for {
		loc := kvPasswordKey.FindStringIndex(s)
		if loc == nil || strings.HasPrefix(s[loc[1]:], "'") {
			break
		}
		end := len(s)
		if next := kvNextKey.FindStringIndex(s[loc[1]:]); next != nil {
			end = loc[1] + next[0]
		}
		secrets = append(secrets, s[loc[1]:end])
		b.WriteString(s[:loc[1]] + redacted)
		s = s[end:]
	}
	b.WriteString(s)
	return Redact(b.String()), secrets
}

// Redact returns s with every password in it replaced by "xxxxx". s is a
// connection string or any text that holds some, such as an error message:
// it masks URLs (the password in the user information, even one with an
// unescaped "@", a URL that does not parse or whose scheme is mistyped, and
// password query parameters), "user:password@host" and keyword/value
// strings ("host=h password=secret"). It is
// the one function corotask masks passwords with, in every message and
// error.
func Redact(s string) string {
	if strings.Contains(s, "://") && !strings.ContainsAny(s, " \t\n`\"'") {
		if p, err := url.Parse(s); err == nil && p.User != nil {
			if _, ok := p.User.Password(); ok {
				p.User = url.UserPassword(p.User.Username(), redacted)
				s = p.String()
			}
		}
	}
	s = userinfoPassword.ReplaceAllString(s, "${1}"+redacted+"@")
	s = mistypedUserinfoPassword.ReplaceAllString(s, "${1}"+redacted+"@")
	s = schemelessPassword.ReplaceAllString(s, "${1}"+redacted+"@")
	return kvPassword.ReplaceAllString(s, "${1}"+redacted)
}
