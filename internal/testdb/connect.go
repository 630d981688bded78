package testdb

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// connect opens a connection to url for testdb's own statements (creating,
// dropping and sweeping databases). A server that has no connection slot
// free at the moment (many test processes share it) or is starting up is
// tried again, until ctx ends: a test must not fail because others ran at
// the same time.
func connect(ctx context.Context, url string) (*pgx.Conn, error) {
	wait := 10 * time.Millisecond
	for {
		conn, err := pgx.Connect(ctx, url)
		if err == nil || !busyServer(err) {
			return conn, err
		}
		if f := refused.Load(); f != nil {
			(*f)(err)
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// refused, when set, hears of each connection connect tries again (for its
// test).
var refused atomic.Pointer[func(error)]

// busyServer reports whether err says the server refused a connection for
// now: too many clients (53300), or starting up or shutting down (57P03).
func busyServer(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "53300" || pgErr.Code == "57P03")
}
