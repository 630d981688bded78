package dberr

import (
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Unreachable reports whether err says that the database cannot be reached
// for now, rather than that it answered: a failed connection attempt or a
// network error, a connection that ended mid-reply, or a PostgreSQL error
// of class 08 (connection exception, which PgBouncer also raises while its
// logins to the server fail), 57P (a shutdown, a restart, a server still
// starting) or 53300 (too many connections). Such an error is waited out;
// any other is an answer.
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P") || pgErr.Code == "53300"
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connectErr) || errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
