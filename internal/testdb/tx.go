package testdb

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

var (
	sharedOnce sync.Once
	sharedPool *pgxpool.Pool
	sharedErr  error
)

// Tx begins a transaction on a migrated database shared by the tests, rolled
// back when the test ends, and returns it. Each test sees only its own writes,
// so tests of client functions (Create, Send, Cancel, ...) run in parallel on
// one database instead of making one each. Use [New] instead when another
// connection must see what the test commits: an executor, a LISTEN, a second
// session waiting on a lock.
//
// Every statement run through the returned Tx runs in a savepoint of its own,
// so that a statement that fails (as tests of errors expect) does not abort
// the transaction: the test goes on as it would on a pool. Commit fails the
// test.
func Tx(t testing.TB) pgx.Tx {
	t.Helper()
	pool, err := shared(t)
	if err != nil {
		t.Fatalf("testdb: shared database: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), Patience)
	defer cancel()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatalf("testdb: begin: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), Patience)
		defer cancel()
		if err := tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
			t.Errorf("testdb: roll back: %v", err)
		}
	})
	return &savepointTx{Tx: tx, t: t}
}

// shared returns the pool on the shared database, making the database (once
// per server and migration set) and the pool (once per process).
func shared(t testing.TB) (*pgxpool.Pool, error) {
	t.Helper()
	admin := AdminURL(t)
	sharedOnce.Do(func() {
		var name string
		name, sharedErr = sharedDatabase(admin)
		if sharedErr != nil {
			return
		}
		var cfg *pgxpool.Config
		cfg, sharedErr = pgxpool.ParseConfig(onDatabase(admin, name))
		if sharedErr != nil {
			return
		}
		// One connection per test running at once; idle ones are closed.
		cfg.MaxConns = 32
		cfg.MaxConnIdleTime = 10 * time.Second
		sharedPool, sharedErr = pgxpool.NewWithConfig(context.Background(), cfg)
	})
	return sharedPool, sharedErr
}

// sharedDatabase makes (once per server and migration set) the database the
// transactions of [Tx] run on, a copy of the template, and returns its name.
// Like the template it stays on the server for later runs: the transactions
// leave nothing in it.
func sharedDatabase(admin string) (string, error) {
	tmpl, err := migratedTemplate(admin)
	if err != nil {
		return "", fmt.Errorf("template database: %w", err)
	}
	hash, err := migrationsHash()
	if err != nil {
		return "", err
	}
	return lastingDatabase(admin, "corotask_shared_"+hash, func(ctx context.Context, conn *pgx.Conn, building string) error {
		_, err := conn.Exec(ctx, "CREATE DATABASE "+building+" TEMPLATE "+tmpl)
		return err
	})
}

// savepointTx is the transaction [Tx] returns: each statement run through it
// runs in a savepoint, rolled back when the statement fails.
type savepointTx struct {
	pgx.Tx
	t testing.TB
}

func (s *savepointTx) Commit(context.Context) error {
	s.t.Errorf("testdb: the transaction of testdb.Tx is rolled back when the test ends; it cannot commit")
	return errors.New("testdb: cannot commit")
}

// within runs stmt in a savepoint: released when stmt succeeds, rolled back
// to when it fails.
func (s *savepointTx) within(ctx context.Context, stmt func(pgx.Tx) error) error {
	sp, err := s.Tx.Begin(ctx)
	if err != nil {
		return err
	}
	if err := stmt(sp); err != nil {
		_ = sp.Rollback(context.WithoutCancel(ctx))
		return err
	}
	return sp.Commit(ctx)
}

func (s *savepointTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	var tag pgconn.CommandTag
	err := s.within(ctx, func(sp pgx.Tx) error {
		var err error
		tag, err = sp.Exec(ctx, sql, args...)
		return err
	})
	return tag, err
}

// Query reads all the rows before it returns, so that the savepoint can be
// released or rolled back; tests read few rows.
func (s *savepointTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := s.query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return rows, nil
}

func (s *savepointTx) query(ctx context.Context, sql string, args ...any) (*bufferedRows, error) {
	var rows *bufferedRows
	err := s.within(ctx, func(sp pgx.Tx) error {
		r, err := sp.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		rows, err = buffer(r)
		return err
	})
	if err != nil {
		return nil, err
	}
	return rows, nil
}

func (s *savepointTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := s.query(ctx, sql, args...)
	return &bufferedRow{rows: rows, err: err}
}
