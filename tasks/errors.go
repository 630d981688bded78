package tasks

import "github.com/corotask/corotask/internal/dberr"

// Errors of corotask's own conditions. Every error corotask returns for one of
// them wraps both the sentinel (errors.Is) and, when the database raised it,
// the *pgconn.PgError (errors.As), whose Code is a corotask SQLSTATE: CT404,
// CT410, CT413, CT409 (running), CT422 (wrong status), CT416 (no message),
// CT508 (parent cycle), or 23505 for ErrExists; flow control's changes raise
// CT4T4 (ErrUnknownType), CT4P9 (ErrPaused), CT4N9 (ErrNotPaused), CT4R4
// (ErrNoRateLimit) and CT4K4 (ErrNoKeyLimit).
var (
	// ErrNotFound: the task (or the parent named in a Spec) does not exist.
	ErrNotFound = dberr.NotFound
	// ErrExists: a task with this ID exists already, or a live task of the
	// same type has this key, or one that ended within the type's key
	// window (see Spec.Key). The error is an *ExistsError that names the
	// task, when the database named it.
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
	// ErrPaused: Pause named a type that is paused already; the error says
	// since when and by which database role.
	ErrPaused = dberr.Paused
	// ErrNotPaused: Resume named a type that is not paused.
	ErrNotPaused = dberr.NotPaused
	// ErrUnknownType: a control named a type that no executor has
	// registered, no task has and that has no controls yet: a misspelt
	// type, most likely. AllowNewType accepts it (to set limits before the
	// deploy that brings the type).
	ErrUnknownType = dberr.UnknownType
	// ErrNoRateLimit: Acquire or ClearRateLimit named a rate limit that does
	// not exist.
	ErrNoRateLimit = dberr.NoRateLimit
	// ErrNoKeyLimit: ClearKeyLimit named a key space that has no limit.
	ErrNoKeyLimit = dberr.NoKeyLimit
)

// MaxMessageBytes is the largest message body send_to_task accepts, measured
// as PostgreSQL stores it (jsonb). Larger messages are refused with ErrTooLarge.
const MaxMessageBytes = dberr.MaxMessageBytes

// MaxTraceBytes is the largest trace context (see WithTrace) stored with a
// message or a task, measured as PostgreSQL stores it (jsonb); larger ones
// are refused with ErrTooLarge. With MaxMessageBytes it bounds what one
// message stores, whoever sends it.
const MaxTraceBytes = dberr.MaxTraceBytes

// ExistsError is the error Create and CreateMany return when a task could
// not be created because another exists: one with its ID, or one of its
// type with its key, live or ended within the type's key window (see
// Spec.Key). errors.Is(err, ErrExists) holds.
type ExistsError struct {
	// ID is the task that exists: the ID that was taken, or the task that
	// holds the key (live, or ended within the key window). When two tasks of one call (a CreateMany, the
	// children of one poll) carry the same key, it names the first of them,
	// which the refusal rolled back with the rest.
	ID  ID
	err error
}

func (e *ExistsError) Error() string { return e.err.Error() }
func (e *ExistsError) Unwrap() error { return e.err }

// translate is dberr.Translate, with an *ExistsError for a task that exists
// and that the database named.
func translate(err error) error {
	err = dberr.Translate(err)
	if id, ok := dberr.ExistingTask(err); ok {
		return &ExistsError{ID: ID(id), err: err}
	}
	return err
}
