// Package dberr is the one place where errors PostgreSQL raises for
// corotask's own conditions become corotask's sentinel errors. The sentinels
// are defined here and exported by package tasks.
package dberr

import (
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/oklog/ulid/v2"
)

var (
	NotFound = errors.New("task not found")
	Exists   = errors.New("task already exists")
	Ended    = errors.New("task has ended")
	TooLarge = errors.New("message too large")
	// The operator actions' refusals.
	Running     = errors.New("task is running")
	WrongStatus = errors.New("task status does not allow this")
	NoMessage   = errors.New("no such message")
	// ParentCycle: a task would be its own ancestor.
	ParentCycle = errors.New("parent cycle")
	// The refusals of flow control's changes (sql/functions/controls.sql).
	Paused      = errors.New("type already paused")
	NotPaused   = errors.New("type not paused")
	UnknownType = errors.New("unknown task type")
	NoRateLimit = errors.New("no such rate limit")
	NoKeyLimit  = errors.New("no such key limit")
)

// MaxMessageBytes is the largest message body corotask.send_to_task accepts
// (corotask.max_message_bytes()).
const MaxMessageBytes = 1 << 20

// MaxTraceBytes is the largest trace context stored with a message or a task
// (corotask.max_trace_bytes()).
const MaxTraceBytes = 8 << 10

// SQLSTATEs raised by corotask's SQL functions.
const (
	codeNotFound  = "CT404"
	codeEnded     = "CT410"
	codeTooLarge  = "CT413"
	codeRunning   = "CT409"
	codeStatus    = "CT422"
	codeNoMessage = "CT416"
	codeCycle     = "CT508"
	codeUniqueKey = "23505"
	// Flow control's: the letter names the subject, the digit follows
	// CT404 (not found) and CT409 (conflict).
	codeUnknownType = "CT4T4"
	codePaused      = "CT4P9"
	codeNotPaused   = "CT4N9"
	codeNoRateLimit = "CT4R4"
	codeNoKeyLimit  = "CT4K4"
)

// translated is a driver error recognized as one of the sentinels: its text
// names the task, and both the sentinel and the *pgconn.PgError stay in the
// chain for errors.Is and errors.As.
type translated struct {
	sentinel error
	text     string
	pg       *pgconn.PgError
}

func (e *translated) Error() string   { return e.text }
func (e *translated) Unwrap() []error { return []error{e.sentinel, e.pg} }

// Translate turns the errors PostgreSQL raises for corotask's own conditions
// into errors that wrap a sentinel (NotFound, Exists, Ended, TooLarge) and
// name the task concerned, keeping the *pgconn.PgError in the chain; any
// other error is returned as it is.
func Translate(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	wrap := func(sentinel error, text string) error {
		return &translated{sentinel: sentinel, text: text, pg: pgErr}
	}
	var sentinel error
	switch pgErr.Code {
	case codeNotFound:
		sentinel = NotFound
	case codeEnded:
		sentinel = Ended
	case codeRunning:
		sentinel = Running
	case codeStatus:
		sentinel = WrongStatus
	case codeNoMessage:
		sentinel = NoMessage
	case codeUnknownType, codePaused, codeNotPaused, codeNoRateLimit, codeNoKeyLimit:
		// The message names the type, limit or space, and says why.
		sentinel = map[string]error{codeUnknownType: UnknownType, codePaused: Paused, codeNotPaused: NotPaused,
			codeNoRateLimit: NoRateLimit, codeNoKeyLimit: NoKeyLimit}[pgErr.Code]
		return wrap(sentinel, messageText(pgErr))
	case codeTooLarge:
		// DETAIL is the body's size, or "trace <bytes> <limit>".
		if f := strings.Fields(pgErr.Detail); len(f) == 3 && f[0] == "trace" {
			return wrap(TooLarge, fmt.Sprintf("%s: trace context of %s bytes, limit %s", TooLarge, f[1], f[2]))
		}
		return wrap(TooLarge, fmt.Sprintf("%s: %s bytes, limit %d", TooLarge, pgErr.Detail, MaxMessageBytes))
	case codeCycle:
		// The message names the tasks concerned, and HINT the rule.
		text := fmt.Sprintf("%s: %s", ParentCycle, uuidPattern.ReplaceAllStringFunc(
			strings.TrimPrefix(pgErr.Message, "corotask: "), ulidOf))
		if pgErr.Hint != "" {
			text += ": " + pgErr.Hint
		}
		return wrap(ParentCycle, text)
	case codeUniqueKey:
		switch pgErr.ConstraintName {
		case "tasks_pkey":
			return wrap(Exists, fmt.Sprintf("%s: %s", Exists, ulidOf(idFromDetail(pgErr.Detail))))
		case liveKeyIndex, keyWindows:
			// corotask's own refusal names the task that holds the key
			// (live, or ended within its type's key window);
			// the index's own (two commits at once) names the type and key.
			return wrap(Exists, fmt.Sprintf("%s: %s", Exists,
				unquotedULIDs(strings.TrimPrefix(pgErr.Message, "corotask: "))+keyDetail(pgErr)))
		}
		return err
	default:
		return err
	}
	// DETAIL is "<role> <uuid>", role being "task" or "parent".
	role, uuid, ok := strings.Cut(pgErr.Detail, " ")
	if !ok {
		return wrap(sentinel, fmt.Sprintf("%s: %s", sentinel, pgErr.Message))
	}
	what := ulidOf(uuid)
	if pgErr.Hint != "" {
		// Why an operator action was refused: "it is sleeping: ...".
		what += ": " + pgErr.Hint
	}
	if role == "parent" {
		return wrap(sentinel, fmt.Sprintf("parent %s: %s", sentinel, what))
	}
	return wrap(sentinel, fmt.Sprintf("%s: %s", sentinel, what))
}

// liveKeyIndex is the unique index of the live tasks' keys.
const liveKeyIndex = "tasks_live_key"

// keyWindows is the table of the types' key windows, which the refusal of a
// key that a task ended within its window holds names as its constraint.
const keyWindows = "key_windows"

// keyDetail is what a violation of liveKeyIndex raised by the index itself
// adds to its message: its DETAIL, "Key (task_type, task_key)=(t, k)
// already exists.".
func keyDetail(pgErr *pgconn.PgError) string {
	if pgErr.Detail == "" || strings.HasPrefix(pgErr.Detail, "task ") {
		return ""
	}
	return ": " + pgErr.Detail
}

// ExistingTask returns the task named by an error Translate made of a
// refusal for a task that exists: the task whose ID was taken, or the
// live task that holds a key. ok is false for any other error, or when the
// database did not name the task.
func ExistingTask(err error) (id [16]byte, ok bool) {
	var t *translated
	if !errors.As(err, &t) || t.sentinel != Exists {
		return id, false
	}
	var uuid string
	switch {
	case t.pg.ConstraintName == "tasks_pkey":
		uuid = idFromDetail(t.pg.Detail)
	case strings.HasPrefix(t.pg.Detail, "task "):
		uuid = strings.TrimPrefix(t.pg.Detail, "task ")
	default:
		return id, false
	}
	h := strings.ReplaceAll(uuid, "-", "")
	if len(h) != 32 {
		return id, false
	}
	if _, err := hex.Decode(id[:], []byte(h)); err != nil {
		return id, false
	}
	return id, true
}

// unquotedULIDs shows the task IDs of msg as ULIDs, but for text between
// double quotes: a type or a key, which may look like a UUID and is shown as
// it is.
func unquotedULIDs(msg string) string {
	parts := strings.Split(msg, `"`)
	for i := 0; i < len(parts); i += 2 {
		parts[i] = uuidPattern.ReplaceAllStringFunc(parts[i], ulidOf)
	}
	return strings.Join(parts, `"`)
}

// uuidPattern matches a UUID in a message of the database.
var uuidPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// idFromDetail extracts the UUID from a unique violation's DETAIL,
// "Key (task_id)=(<uuid>) already exists.".
func idFromDetail(detail string) string {
	_, rest, ok := strings.Cut(detail, "=(")
	if !ok {
		return detail
	}
	uuid, _, _ := strings.Cut(rest, ")")
	return uuid
}

// ulidOf prints a task's UUID as the ULID corotask shows everywhere else, or
// returns it as it is when it is not a UUID.
func ulidOf(uuid string) string {
	h := strings.ReplaceAll(uuid, "-", "")
	var id ulid.ULID
	if len(h) != 32 {
		return uuid
	}
	if _, err := hex.Decode(id[:], []byte(h)); err != nil {
		return uuid
	}
	return id.String()
}
