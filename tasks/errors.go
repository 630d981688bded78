package tasks

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

var (
	// ErrNotFound: the task (or the parent named in a Spec) does not exist.
	ErrNotFound = errors.New("task not found")
	// ErrExists: a task with this ID exists already.
	ErrExists = errors.New("task already exists")
	// ErrEnded: the task is done, failed or canceled, so it takes no more
	// messages, children or cancellation.
	ErrEnded = errors.New("task has ended")
	// ErrTooLarge: a message or state is larger than the database accepts
	// (MaxMessageBytes for a message body).
	ErrTooLarge = errors.New("message too large")
	// ErrRunning: an executor holds the task (its poll is running, or its
	// claim expired and waits to be taken over), so an operator action
	// that would race the poll is refused; try again once it has ended.
	ErrRunning = errors.New("task is running")
	// ErrWrongStatus: the task's status does not allow the operator action
	// (Retry a task that is not waiting, Restart one that has not failed);
	// the error says which status it has.
	ErrWrongStatus = errors.New("task status does not allow this")
	// ErrNoMessage: DropMessage named a position the task's inbox does not have.
	ErrNoMessage = errors.New("no such message")
)

// MaxMessageBytes is the largest message body send_to_task accepts, measured
// as PostgreSQL stores it (jsonb). Larger messages are refused with ErrTooLarge.
const MaxMessageBytes = 1 << 20

// SQLSTATEs raised by corotask's SQL functions.
const (
	codeNotFound  = "CT404"
	codeEnded     = "CT410"
	codeTooLarge  = "CT413"
	codeRunning   = "CT409"
	codeStatus    = "CT422"
	codeNoMessage = "CT416"
	codeUniqueKey = "23505"
)

// TranslateError turns the errors PostgreSQL raises for corotask's own
// conditions into errors that wrap this package's sentinels (ErrNotFound,
// ErrExists, ErrEnded, ErrTooLarge) and name the task concerned; any other
// error is returned as it is. Every corotask package translates driver errors
// through this one function.
func TranslateError(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	var sentinel error
	switch pgErr.Code {
	case codeNotFound:
		sentinel = ErrNotFound
	case codeEnded:
		sentinel = ErrEnded
	case codeRunning:
		sentinel = ErrRunning
	case codeStatus:
		sentinel = ErrWrongStatus
	case codeNoMessage:
		sentinel = ErrNoMessage
	case codeTooLarge:
		return fmt.Errorf("%w: %s bytes, limit %d", ErrTooLarge, pgErr.Detail, MaxMessageBytes)
	case codeUniqueKey:
		if pgErr.ConstraintName == "tasks_pkey" {
			return fmt.Errorf("%w: %s", ErrExists, idFromDetail(pgErr.Detail))
		}
		return err
	default:
		return err
	}
	// DETAIL is "<role> <uuid>", role being "task" or "parent".
	role, uuid, ok := strings.Cut(pgErr.Detail, " ")
	if !ok {
		return fmt.Errorf("%w: %s", sentinel, pgErr.Message)
	}
	what := uuid
	if id, err := ParseID(uuid); err == nil {
		what = id.String()
	}
	if pgErr.Hint != "" {
		// Why the action was refused: "it is sleeping: ...".
		what += ": " + pgErr.Hint
	}
	if role == "parent" {
		return fmt.Errorf("parent %w: %s", sentinel, what)
	}
	return fmt.Errorf("%w: %s", sentinel, what)
}

// idFromDetail extracts the ID from a unique violation's DETAIL,
// "Key (task_id)=(<uuid>) already exists.", as a ULID.
func idFromDetail(detail string) string {
	_, rest, ok := strings.Cut(detail, "=(")
	if !ok {
		return detail
	}
	uuid, _, _ := strings.Cut(rest, ")")
	if id, err := ParseID(uuid); err == nil {
		return id.String()
	}
	return uuid
}
