package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/corotask/corotask/internal/database"
	"github.com/corotask/corotask/internal/query"
	corosql "github.com/corotask/corotask/sql"
	"github.com/corotask/corotask/tasks"
)

// connectTimeout bounds how long connecting may take when the URL does not
// set connect_timeout.
const connectTimeout = 10 * time.Second

// target returns the database to act on: --database-url, else $DATABASE_URL
// (through a.getenv), else libpq's PG* environment, else the database
// corotask on 127.0.0.1:5432 (database.LocalURL, the examples' default);
// or, with --private-cluster, the private cluster. It says on
// standard error which database it is, with the password masked. It never
// falls back to the private cluster on its own.
func (a *app) target(ctx context.Context) (database.Target, error) {
	if a.privateCluster && a.databaseURL != "" {
		return database.Target{}, usagef("--database-url and --private-cluster exclude each other: give one")
	}
	opts := database.Options{Explicit: a.databaseURL, Getenv: a.getenv, Local: a.localURL, StartPrivate: a.startPrivate}
	if a.privateCluster {
		opts.Private = database.PrivateOnly
	}
	t, err := database.Find(ctx, opts)
	if err != nil {
		return database.Target{}, err
	}
	fmt.Fprintf(a.stderr, "corotask %s: using %s\n", a.cmd, t)
	return t, nil
}

// connect opens one connection to the database; the caller closes it with
// closeConn. A database that does not exist is created when the command
// says so (migrate); else the error says to run migrate. Unless the command
// runs on any schema (migrate), it checks that this build runs on the
// database's schema (sql.CheckSchema), and returns the error that says what
// was found, what is needed and what to do if not.
func (a *app) connect(ctx context.Context) (*pgx.Conn, error) {
	t, err := a.target(ctx)
	if err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig(t.ConnString)
	if err != nil {
		return nil, invalidURL(t, err)
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = connectTimeout
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil && a.createDatabase && database.IsMissingDatabase(err) {
		if err := a.ensureDatabase(ctx, t, cfg.Database); err != nil {
			return nil, err
		}
		conn, err = pgx.ConnectConfig(ctx, cfg)
	}
	if err != nil {
		return nil, database.ConnectError(t.String(), err)
	}
	if !a.anySchema {
		if _, err := corosql.CheckSchema(ctx, conn); err != nil {
			closeConn(ctx, conn)
			return nil, err
		}
	}
	return conn, nil
}

// ensureDatabase creates t's database, name, which the server said does not
// exist (sql.EnsureDatabase: another process may be creating it at the same
// time), and says so on standard output if this call created it.
func (a *app) ensureDatabase(ctx context.Context, t database.Target, name string) error {
	created, err := corosql.EnsureDatabase(ctx, t.ConnString)
	if err != nil {
		return fmt.Errorf("create the database of %s: %w", t, err)
	}
	if created {
		fmt.Fprintf(a.stdout, "created database %s\n", name)
	}
	return nil
}

// invalidURL is the usage error for a connection string that does not parse:
// the string with any password masked, once, and the reason
// (database.InvalidReason).
func invalidURL(t database.Target, err error) error {
	what := "database URL " + database.RedactConnString(t.ConnString)
	if t.Source == database.FromLibpqEnv {
		what = "connection settings: " + t.String()
	}
	return usagef("invalid %s: %s", what, database.InvalidReason(t.ConnString, err))
}

// closeConn closes conn, even when ctx is already canceled.
func closeConn(ctx context.Context, conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

// withConn connects, runs fn and closes the connection.
func (a *app) withConn(ctx context.Context, fn func(conn *pgx.Conn) error) error {
	conn, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer closeConn(ctx, conn)
	return fn(conn)
}

// readSnapshot connects and runs fn in a read-only repeatable-read
// transaction, so that everything fn reads (and now, the transaction's time,
// which the derived statuses are computed against) is one consistent view.
func (a *app) readSnapshot(ctx context.Context, fn func(tx pgx.Tx, now time.Time) error) error {
	return a.withConn(ctx, func(conn *pgx.Conn) error {
		return pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			var now time.Time
			if err := tx.QueryRow(ctx, query.Now).Scan(&now); err != nil {
				return err
			}
			return fn(tx, now)
		})
	})
}

// explain adds a hint to errors whose cause is a missing schema.
func explain(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "3F000", "42P01", "42883": // invalid_schema_name, undefined_table, undefined_function
			if strings.Contains(pgErr.Message, "corotask") {
				return fmt.Errorf("%w (is the schema installed? run 'corotask migrate')", err)
			}
		}
	}
	return err
}

// taskError returns, for an error of the tasks or inbox packages that wraps
// one of tasks' sentinel errors, the part that names the condition and the
// task ("task has ended: 01J..."), without the operation around it, which the
// command's name already says. Other errors are returned as they are.
func taskError(err error) error {
	sentinels := []error{tasks.ErrNotFound, tasks.ErrEnded, tasks.ErrExists, tasks.ErrTooLarge,
		tasks.ErrRunning, tasks.ErrWrongStatus, tasks.ErrNoMessage}
	for e := err; e != nil; e = errors.Unwrap(e) {
		inner := []error{errors.Unwrap(e)}
		if m, ok := e.(interface{ Unwrap() []error }); ok {
			inner = m.Unwrap() // a driver error translated: sentinel and *pgconn.PgError
		}
		for _, s := range sentinels {
			if e == s || slices.Contains(inner, s) {
				return e
			}
		}
	}
	return err
}
