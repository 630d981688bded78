package main

// This file finds the database as the corotask CLI does: --database-url,
// else $DATABASE_URL, else libpq's PG* variables, else the database corotask
// of the server on 127.0.0.1:5432, created when missing (sql.EnsureDatabase),
// so that the examples' tasks and schema stay out of the server's
// maintenance database and the CLI sees them without being told where. The
// corotask commands the program prints name the database all the same. It
// imports only corotask's public sql package: copy it along with main.go.

import (
	"context"
	"fmt"
	"log"
	"net/url"
	"os"
	"regexp"
	"strings"

	corosql "github.com/corotask/corotask/sql"
)

// localURL is the database used when nothing says which to use, as the
// CLI's: corotask, which ensureDatabase creates, so that the schema does not
// land in the server's maintenance database (postgres).
const localURL = "postgres://postgres@127.0.0.1:5432/corotask"

// fromLocal is where localURL comes from, for messages.
const fromLocal = "the local server"

// target is the database the program uses.
type target struct {
	// ConnString is a URL or a keyword/value string; "" for libpq's PG*
	// variables, which pgx reads as psql does.
	ConnString string
	from       string // where ConnString came from
}

// findTarget returns --database-url (explicit), else $DATABASE_URL, else
// libpq's PG* variables when one is set, else the server on 127.0.0.1:5432.
func findTarget(explicit string) target {
	if explicit != "" {
		return target{explicit, "--database-url"}
	}
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return target{u, "DATABASE_URL"}
	}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") {
			return target{"", "libpq's PG* variables"}
		}
	}
	return target{localURL, fromLocal}
}

// ensureDatabase creates the database corotask on the local server when t is
// that server (nothing said which database to use) and the database does
// not exist yet, and says so on standard error. Another process creating it
// at the same time is no error.
func (t target) ensureDatabase(ctx context.Context) error {
	if t.from != fromLocal {
		return nil
	}
	created, err := corosql.EnsureDatabase(ctx, localURL)
	if err != nil {
		return t.Wrap("create the database on", err)
	}
	if created {
		log.Printf("created database corotask on 127.0.0.1:5432 (the default when neither --database-url, " +
			"DATABASE_URL nor PG* variables are given; DROP DATABASE corotask removes it)")
	}
	return nil
}

// String describes t for messages, with the password masked.
func (t target) String() string {
	if t.ConnString == "" {
		return t.from
	}
	return withoutPassword(t.ConnString, "xxxxx") + " (" + t.from + ")"
}

// Wrap returns err, for the operation op on t, naming t. When nothing said
// which database to use, it says how to give one.
func (t target) Wrap(op string, err error) error {
	if t.from == fromLocal {
		return fmt.Errorf("%s %s: %w\n%s", op, t, err, noDatabaseHint)
	}
	return fmt.Errorf("%s %s: %w", op, t, err)
}

// noDatabaseHint says how to give a database when the local server fails.
const noDatabaseHint = `Give the database with --database-url or DATABASE_URL. Without a server, one can be
started from this machine's PostgreSQL binaries: "go run ./cmd/corotask --private-cluster migrate"
in a clone of corotask starts it and prints its URL.`

// Command returns the corotask command line that reaches t, to paste into a
// shell. A password is never printed: note then says where to give it.
func (t target) Command() (cmd, note string) {
	if t.ConnString == "" {
		return "corotask", "with the same PG* variables set"
	}
	u := withoutPassword(t.ConnString, "")
	if u != t.ConnString {
		note = "the password is not shown: give it in PGPASSWORD or ~/.pgpass"
	}
	return "corotask --database-url " + shellQuote(u), note
}

// Commands returns the command lines of [target.Command] for each of cmds
// (such as "cancel 01J..."), in backquotes and joined with " and ", followed
// by the note in parentheses when there is one.
func (t target) Commands(cmds ...string) string {
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

var kvPassword = regexp.MustCompile(`password=('([^'\\]|\\.)*'|\S*)`)

// withoutPassword returns the connection string s with its password replaced
// by mask, or removed when mask is "".
func withoutPassword(s, mask string) string {
	if !strings.Contains(s, "://") {
		if mask == "" {
			return strings.Join(strings.Fields(kvPassword.ReplaceAllString(s, "")), " ")
		}
		return kvPassword.ReplaceAllString(s, "password="+mask)
	}
	u, err := url.Parse(s)
	if err != nil {
		return "(a URL that does not parse)"
	}
	if p, ok := u.User.Password(); ok && p != "" {
		if mask == "" {
			u.User = url.User(u.User.Username())
		} else {
			u.User = url.UserPassword(u.User.Username(), mask)
		}
	}
	if q := u.Query(); q.Has("password") {
		if mask == "" {
			q.Del("password")
		} else {
			q.Set("password", mask)
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// shellQuote quotes s for a POSIX shell when it needs quoting.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:@%+=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
