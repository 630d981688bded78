// Package testdb isolates tests that use PostgreSQL, so that they run in
// parallel and never see what another test left behind.
//
// [Tx] gives a test a transaction on a migrated database shared by the tests,
// rolled back when the test ends: cheap, for tests of client functions. [New]
// and [URL] give a test a fresh migrated database of its own, dropped when the
// test ends (in the background under [Main], which waits for the drops): for
// tests whose commits other connections must see (executors, LISTEN).
//
// The server is the one internal/database resolves (DATABASE_URL, libpq's PG*
// environment, a server on 127.0.0.1:5432, or a private cluster). A template
// database holding the current migrations is made once per migration set and
// cloned for every test; the shared database is made once per migration set
// too. Both stay on the server, reused by later runs, until no run has used
// them for a day (see [unusedAge]). A test database that a killed test process
// could not drop is dropped by a later run (see [sweepAge]).
package testdb

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/internal/database"
	corosql "github.com/corotask/corotask/sql"
)

var (
	adminOnce sync.Once
	adminURL  string
	adminErr  error
	tmplOnce  sync.Once
	tmplName  string
	tmplErr   error
)

// AdminURL returns the URL of the server's maintenance database, resolving
// (and if need be starting) the server once per process.
func AdminURL(t testing.TB) string {
	t.Helper()
	u, err := admin()
	if err != nil {
		t.Fatalf("test database: no database server: %v", err)
	}
	return u
}

func admin() (string, error) {
	adminOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		adminURL, adminErr = adminTarget(ctx)
		if adminErr == nil {
			sweep(ctx, adminURL, time.Now())
		}
	})
	return adminURL, adminErr
}

// adminTarget resolves the server as the examples do (database.URL). On the
// local server it found by itself (127.0.0.1:5432) the tests connect without
// TLS: on loopback it protects nothing, and costs every connection a
// handshake (slow in a -race build), and when a query is interrupted pgx
// sends its cancel request over a new TLS connection, which a busy server
// was seen to leave hanging until pgx gave up after 15 s, holding up the
// test's pool.Close as long. A URL given through DATABASE_URL or libpq's
// variables is used as it is.
func adminTarget(ctx context.Context) (string, error) {
	t, err := database.Find(ctx, database.Options{Private: database.PrivateFallback, Local: database.LocalMaintenanceURL})
	if err != nil {
		return "", err
	}
	if t.Source != database.FromLocal {
		return t.ConnString, nil
	}
	u, err := url.Parse(t.ConnString)
	if err != nil {
		return "", fmt.Errorf("parse %s: %w", database.Redact(t.ConnString), err)
	}
	q := u.Query()
	q.Set("sslmode", "disable")
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func migratedTemplate(admin string) (string, error) {
	tmplOnce.Do(func() { tmplName, tmplErr = template(admin) })
	return tmplName, tmplErr
}

// URL creates a fresh migrated database for the test, dropped when the test
// ends, and returns its URL.
func URL(t testing.TB) string {
	t.Helper()
	admin := AdminURL(t)
	tmpl, err := migratedTemplate(admin)
	if err != nil {
		t.Fatalf("test database: template database: %v", err)
	}
	return create(t, admin, tmpl)
}

// EmptyURL creates a fresh database without the corotask schema, dropped when
// the test ends, and returns its URL: for tests of the migrations themselves.
func EmptyURL(t testing.TB) string {
	t.Helper()
	return create(t, AdminURL(t), "template0")
}

func create(t testing.TB, admin, template string) string {
	t.Helper()
	u, drop, err := createDatabase(admin, template)
	if err != nil {
		t.Fatalf("test database: %v", err)
	}
	t.Cleanup(func() {
		// A failed or panicking test drops its database at once: the
		// process may be about to die.
		if !t.Failed() && !panicking() && dropLater(drop) {
			return
		}
		if err := drop(); err != nil {
			t.Logf("test database: %v", err)
		}
	})
	return u
}

// ForExample is New for Example functions, which have no testing.TB: it
// panics when no database can be had, and returns a pool on a fresh migrated
// database and a function that closes the pool and drops the database.
func ForExample() (*pgxpool.Pool, func()) {
	admin, err := admin()
	if err != nil {
		panic(fmt.Sprintf("test database: no database server: %v", err))
	}
	tmpl, err := migratedTemplate(admin)
	if err != nil {
		panic(fmt.Sprintf("test database: template database: %v", err))
	}
	u, drop, err := createDatabase(admin, tmpl)
	if err != nil {
		panic(fmt.Sprintf("test database: %v", err))
	}
	pool, err := pgxpool.New(context.Background(), u)
	if err != nil {
		panic(fmt.Sprintf("test database: open pool: %v", err))
	}
	return pool, func() {
		pool.Close()
		_ = drop()
	}
}

// createDatabase makes a database from template and returns its URL and a
// function that drops it.
func createDatabase(admin, template string) (string, func() error, error) {
	name := testName(time.Now())
	ctx, cancel := context.WithTimeout(context.Background(), Patience)
	defer cancel()
	if err := execAdmin(ctx, admin, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, template)); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	drop := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), Patience)
		defer cancel()
		if err := execAdmin(ctx, admin, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name)); err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		return nil
	}
	return onDatabase(admin, name), drop, nil
}

// onDatabase returns the connection string conn (a URL, a keyword/value
// string, or "" for libpq's environment) with its database replaced by name.
func onDatabase(conn, name string) string {
	if u, err := url.Parse(conn); err == nil && u.Scheme != "" {
		u.Path = "/" + name
		return u.String()
	}
	return strings.TrimSpace(conn + " dbname=" + name)
}

// New creates a fresh migrated database for the test and returns a pool on
// it; both are closed and dropped when the test ends.
func New(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return Pool(t, URL(t))
}

// Pool opens a pool on url, closed when the test ends.
func Pool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	return PoolOfSize(t, url, 0)
}

// PoolOfSize opens a pool of at most n connections on url (0: pgxpool's
// default, or the url's pool_max_conns), closed when the test ends.
func PoolOfSize(t testing.TB, url string, n int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatalf("test database: parse url: %v", err)
	}
	if n > 0 {
		cfg.MaxConns = n
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("test database: open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// WithDatabase returns url with its database name replaced by name.
func WithDatabase(t testing.TB, rawURL, name string) string {
	t.Helper()
	return onDatabase(rawURL, name)
}

// template makes (once per server and migration set) a database holding the
// current migrations and returns its name.
func template(admin string) (string, error) {
	hash, err := migrationsHash()
	if err != nil {
		return "", err
	}
	return lastingDatabase(admin, "corotask_tmpl_"+hash, func(ctx context.Context, conn *pgx.Conn, building string) error {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+building); err != nil {
			return err
		}
		tc, err := connect(ctx, onDatabase(admin, building))
		if err != nil {
			return err
		}
		defer tc.Close(context.Background())
		return corosql.Migrate(ctx, tc)
	})
}

// lastingDatabase returns the database name on the server at admin, made by
// build (into the database it is told, renamed to name only when complete,
// so that a crash never leaves a half-made one) unless it exists already.
// Such databases stay for later runs; concurrent test processes take turns
// through an advisory lock.
func lastingDatabase(admin, name string, build func(ctx context.Context, conn *pgx.Conn, building string) error) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(7261457)"); err != nil {
		return "", fmt.Errorf("lock: %w", err)
	}
	defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock(7261457)") //nolint:errcheck
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", fmt.Errorf("look for database %s: %w", name, err)
	}
	if !exists {
		building := name + "_new"
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+building+" WITH (FORCE)"); err != nil {
			return "", err
		}
		if err := build(ctx, conn, building); err != nil {
			return "", fmt.Errorf("make database %s: %w", name, err)
		}
		if _, err := conn.Exec(ctx, "ALTER DATABASE "+building+" RENAME TO "+name); err != nil {
			return "", err
		}
	}
	return name, markUsed(ctx, conn, name)
}

// migrationsHash identifies everything Migrate applies, the migrations and
// the function files, so that templates (and shared databases) made from
// others are never used: a changed function never runs on a stale template.
func migrationsHash() (string, error) {
	migs, err := corosql.Migrations()
	if err != nil {
		return "", err
	}
	funcs, err := corosql.FunctionFiles()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	// Bump when Migrate's own bookkeeping (corotask.migrations,
	// corotask.function_files) changes.
	h.Write([]byte("bookkeeping v5"))
	for _, m := range migs {
		h.Write([]byte(m.Name))
		h.Write([]byte(m.SQL))
	}
	for _, f := range funcs {
		h.Write([]byte("functions/" + f.Name))
		h.Write([]byte(f.SQL))
	}
	// The release the function files are recorded as: the same files
	// renumbered (releases folded into one before they ship) are another
	// schema to CheckSchema.
	fmt.Fprintf(h, "functions release %d", corosql.BuildSchema().Functions)
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

func execAdmin(ctx context.Context, admin, stmt string) error {
	conn, err := connect(ctx, admin)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, stmt)
	return err
}

func randomSuffix() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return strings.ToLower(hex.EncodeToString(b[:]))
}
