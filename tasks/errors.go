package tasks

import "github.com/corotask/corotask/internal/dberr"

// Errors of corotask's own conditions. Every error corotask returns for one of
// them wraps both the sentinel (errors.Is) and, when the database raised it,
// the *pgconn.PgError (errors.As), whose Code is a corotask SQLSTATE: CT404,
// CT410, CT413, CT409 (running), CT422 (wrong status), CT416 (no message),
// CT508 (parent cycle), or 23505 for ErrExists.
var (
	// ErrNotFound: the task (or the parent named in a Spec) does not exist.
	ErrNotFound = dberr.NotFound
	// ErrExists: a task with this ID exists already.
	ErrExists = dberr.Exists
	// ErrEnded: the task is done, failed or canceled, so it takes no more
	// messages, children or cancellation.
	ErrEnded = dberr.Ended
	// ErrTooLarge: a message or state is larger than the database accepts
	// (MaxMessageBytes for a message body, MaxTraceBytes for the trace
	// context stored with a message or a task).
	ErrTooLarge = dberr.TooLarge
	// ErrRunning: an executor holds the task (its poll is running, or its
	// claim expired and waits to be taken over), so an operator action
	// that would race the poll is refused; try again once it has ended.
	ErrRunning = dberr.Running
	// ErrWrongStatus: the task's status does not allow the operator action
	// (Retry a task that is not waiting, Restart one that has not failed);
	// the error says which status it has.
	ErrWrongStatus = dberr.WrongStatus
	// ErrNoMessage: DropMessage named a position the task's inbox does not
	// have, or one that holds another message than the digest it was given.
	ErrNoMessage = dberr.NoMessage
	// ErrParentCycle: a Spec names its own task as parent, or a task that
	// comes later in the same CreateMany call, so that a task would be its
	// own ancestor (SQLSTATE CT508 from corotask.create_tasks).
	ErrParentCycle = dberr.ParentCycle
)

// MaxMessageBytes is the largest message body send_to_task accepts, measured
// as PostgreSQL stores it (jsonb). Larger messages are refused with ErrTooLarge.
const MaxMessageBytes = dberr.MaxMessageBytes

// MaxTraceBytes is the largest trace context (see WithTrace) stored with a
// message or a task, measured as PostgreSQL stores it (jsonb); larger ones
// are refused with ErrTooLarge. With MaxMessageBytes it bounds what one
// message stores, whoever sends it.
const MaxTraceBytes = dberr.MaxTraceBytes
