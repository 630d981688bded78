package dberr

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// invalid is a refusal of a bad value by one of corotask's functions: its
// text is the function's message, and the *pgconn.PgError stays in the
// chain.
type invalid struct {
	text string
	pg   *pgconn.PgError
}

func (e *invalid) Error() string { return e.text }
func (e *invalid) Unwrap() error { return e.pg }

// TranslateInvalid is Translate, and also turns the refusal of a bad value
// by one of corotask's functions (SQLSTATE 22023 or 22004, raised with a
// message that starts "corotask: ") into an error that reads as that
// message and its hint, without the driver's "ERROR:" and SQLSTATE: those
// messages name the value and say what was wanted.
func TranslateInvalid(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "22023" || pgErr.Code == "22004") &&
		strings.HasPrefix(pgErr.Message, "corotask: ") {
		return &invalid{text: messageText(pgErr), pg: pgErr}
	}
	return Translate(err)
}

// messageText is the message of an error one of corotask's functions
// raised, without its "corotask: " prefix, followed by its hint.
func messageText(pgErr *pgconn.PgError) string {
	text := strings.TrimPrefix(pgErr.Message, "corotask: ")
	if pgErr.Hint != "" {
		text += " (" + pgErr.Hint + ")"
	}
	return text
}
