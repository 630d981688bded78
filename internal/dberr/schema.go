package dberr

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// FromSchema reports whether err holds a PostgreSQL error of class 42
// (syntax error or access rule violation): an undefined function (42883),
// table (42P01) or column (42703), a wrong number or type of arguments, a
// permission denied (42501). Raised by one of corotask's own statements, it
// says that the database is not what the code expects (a schema older or
// newer than the build's, a grant missing), not that the task at hand did
// anything wrong.
func FromSchema(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "42")
}

// PermissionDenied reports whether err holds PostgreSQL's
// insufficient_privilege (42501).
func PermissionDenied(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42501"
}
