package tasks

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what the client functions need from the database: a *pgxpool.Pool, a
// *pgx.Conn or a pgx.Tx all satisfy it. Begin on a pgx.Tx starts a savepoint,
// so functions that need a transaction of their own nest inside the caller's.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}
