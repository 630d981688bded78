// Package database resolves which PostgreSQL server the examples, the CLI and
// the tests use.
//
// The order is: an explicit URL (the --database-url flag), else $DATABASE_URL,
// else a server answering on 127.0.0.1:5432 as user postgres, else a private
// cluster started from this machine's PostgreSQL binaries (initdb and pg_ctl
// on PATH or under /usr/lib/postgresql/*/bin). The private cluster lives in
// the user's cache directory (see [DefaultPrivateDir]), listens only on a unix
// socket inside its data directory and is reused by later calls and by other
// processes; start-up is serialised with a file lock so that parallel
// `go test` processes share one cluster.
package database

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// LocalURL is the URL of the conventional local server that [URL] tries
// before falling back to a private cluster.
const LocalURL = "postgres://postgres@127.0.0.1:5432/postgres"

// localProbeTimeout bounds how long [URL] waits for a server on
// 127.0.0.1:5432 to answer.
const localProbeTimeout = 2 * time.Second

// RootCacheDir is the cache directory [DefaultPrivateDir] uses instead of
// os.UserCacheDir when running as root; see there for why.
const RootCacheDir = "/var/cache/corotask"

// URL returns the connection string to use: explicit if non-empty, else
// $DATABASE_URL, else [LocalURL] if a server answers there within about two
// seconds, else the URL of the private cluster in [DefaultPrivateDir] for the
// installed PostgreSQL version, started if needed (see [Private]).
//
// If none of these can be had, the error says how to install PostgreSQL; it
// wraps [ErrNoPostgres] when no server binaries were found.
func URL(ctx context.Context, explicit string) (string, error) {
	return resolve(ctx, explicit, os.Getenv("DATABASE_URL"), LocalURL, defaultPrivate)
}

// resolve is URL with its inputs made explicit, for tests.
func resolve(ctx context.Context, explicit, env, local string, private func(context.Context) (string, error)) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	if env != "" {
		return env, nil
	}
	localErr := ping(ctx, local, localProbeTimeout)
	if localErr == nil {
		return local, nil
	}
	u, err := private(ctx)
	if err != nil {
		return "", fmt.Errorf("no database: --database-url and DATABASE_URL are unset, %s does not answer (%v), and the private cluster failed: %w",
			Redact(local), localErr, err)
	}
	return u, nil
}

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
	// userinfoPassword matches the password part of "scheme://user:password@".
	userinfoPassword = regexp.MustCompile(`(://[^/?#@:]*:)[^/?#]*@`)
	// kvPassword matches password=... in keyword/value connection strings.
	kvPassword = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S*)`)
)

// Redact returns the connection string u with any password replaced by
// "xxxxx", for error messages. It handles URLs (a password in the user
// information or in a password= query parameter) and keyword/value strings
// such as "host=h password=secret".
func Redact(u string) string {
	if !strings.Contains(u, "://") {
		return kvPassword.ReplaceAllString(u, "${1}"+redacted)
	}
	p, err := url.Parse(u)
	if err != nil {
		// Not a valid URL: best effort on the raw text.
		u = userinfoPassword.ReplaceAllString(u, "${1}"+redacted+"@")
		if before, query, ok := strings.Cut(u, "?"); ok {
			u = before + "?" + redactQuery(query)
		}
		return u
	}
	if _, ok := p.User.Password(); ok {
		p.User = url.UserPassword(p.User.Username(), redacted)
	}
	p.RawQuery = redactQuery(p.RawQuery)
	return p.String()
}

// redactQuery replaces the value of every password=... parameter in a raw
// query, keeping the other parameters as they are.
func redactQuery(q string) string {
	parts := strings.Split(q, "&")
	for i, part := range parts {
		key, _, found := strings.Cut(part, "=")
		if k, err := url.QueryUnescape(key); err == nil {
			key = k
		}
		if found && strings.EqualFold(key, "password") {
			parts[i] = part[:strings.IndexByte(part, '=')+1] + redacted
		}
	}
	return strings.Join(parts, "&")
}
