package dberr

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
)

// Severed reports whether err says that an established connection broke
// under a statement: the server ended the session (an administrator's
// pg_terminate_backend, a server stopping: 57P01, 57P02; idle_session_timeout:
// 57P05; a connection failure, 08003, 08006), or the socket closed or failed
// mid-reply. Another connection most likely works, so the statement is worth
// trying again at once, on a fresh one. A failure to open a connection is
// not severed: the server is not accepting, and is waited out (Unreachable).
//
// A statement that ran out of time (a deadline, a canceled context, a socket
// timeout) is not severed: trying it again at once would wait as long again.
func Severed(err error) bool {
	if err == nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || pgconn.Timeout(err) {
		return false
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "57P01", "57P02", "57P05", "08003", "08006":
			return true
		}
		return false
	}
	if netErr := net.Error(nil); errors.As(err, &netErr) {
		return !netErr.Timeout()
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, pgconn.ErrConnClosed)
}
