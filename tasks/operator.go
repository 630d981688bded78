package tasks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/corotask/corotask/internal/dberr"
	"github.com/corotask/corotask/internal/query"
)

// Operator actions change one task from outside its poller, to fix what
// went wrong. Each is one statement, fenced: it locks the task's row and
// refuses (ErrRunning) a task an executor holds, so it never races a poll.
// Each raises the task's attempt number and is recorded in its history with
// the database role of the session (see History). Cancel is one too. A
// message an operator sends (inbox.SendAsOperator) is recorded as well, but
// is not fenced and raises no attempt number: it waits for a running poll as
// any message does.

// Retry makes a task that waits, retrying after a failure or sleeping,
// ready now. Its failures are kept (see ResetFailures). It fails with
// ErrNotFound, ErrEnded, ErrRunning, or ErrWrongStatus for a task that is
// not waiting (ready, suspended).
func Retry(ctx context.Context, db DB, id ID) error {
	return operate(ctx, db, "retry", query.OperatorRetry, id)
}

// ResetFailures sets the task's count of failed polls in a row back to zero,
// and clears its last error, so that its type's MaxFailures counts anew.
// When it is next polled is unchanged. It fails with ErrNotFound, ErrEnded
// or ErrRunning.
func ResetFailures(ctx context.Context, db DB, id ID) error {
	return operate(ctx, db, "reset failures of", query.OperatorResetFailures, id)
}

// Restart brings a failed task back to life: ready now, with its last
// committed state, its inbox and no failures. Its parent already received
// the completion message saying it failed and is not told of the restart;
// when the task ends again, the parent receives another completion message,
// so a parent that fans in must expect one completion per end of a child.
// It fails with ErrNotFound, ErrRunning, ErrWrongStatus for a task that
// has not failed or whose parent has ended, or ErrExists (an *ExistsError
// naming the holder) when a live task of its type has its key.
func Restart(ctx context.Context, db DB, id ID) error {
	return operate(ctx, db, "restart", query.OperatorRestart, id)
}

// DropMessage removes the message at position (1: the oldest) of the task's
// inbox, if it is still the one digest names (its MessageDigest, as
// corotask show prints it), and returns it (an envelope, as Task.Inbox holds
// them); the task's history keeps it. The check and the drop are one
// statement, under the lock of the task's row: a poll that took messages
// since the inbox was read moves the others up, and then the message at
// position is another, which DropMessage refuses with ErrNoMessage,
// dropping nothing. It acts on the stored inbox of a task no executor holds:
// it fails with ErrRunning while a poll runs (whose commit counts inbox
// positions), and with ErrNotFound, ErrEnded, or ErrNoMessage for a position
// the inbox does not have. It calls the SQL function
// corotask.drop_message(uuid, integer, text), on which a role that drops
// messages needs EXECUTE.
func DropMessage(ctx context.Context, db DB, id ID, position int, digest string) (json.RawMessage, error) {
	if position < 1 {
		return nil, fmt.Errorf("drop message %d of task %s: %w: positions start at 1", position, id, ErrNoMessage)
	}
	if id.IsZero() {
		return nil, fmt.Errorf("drop message: no task (zero id)")
	}
	if !validDigest(digest) {
		return nil, fmt.Errorf("drop message %d of task %s: invalid digest %q: want the %d hex digits of MessageDigest",
			position, id, digest, 2*digestBytes)
	}
	var msg json.RawMessage
	if err := db.QueryRow(ctx, query.OperatorDropMessage, id, position, digest).Scan(&msg); err != nil {
		return nil, fmt.Errorf("drop message %d of task %s: %w", position, id, dberr.Translate(err))
	}
	return msg, nil
}

// SetState replaces the state of a task with state, one JSON value (JSON
// null: the poller's zero value), for an operator who fixes what a poller
// stored; the next poll starts from it. When the task is polled is
// unchanged. Its history entry (Action "set_state") keeps the new state and
// the one it replaced (HistoryEntry.State and StateBefore), whatever the
// type keeps of its polls' states. state that is not JSON is refused before
// the database is asked. It fails with ErrNotFound, ErrEnded or ErrRunning.
// It calls the SQL function corotask.set_task_state(uuid, jsonb), on which a
// role that sets states needs EXECUTE.
func SetState(ctx context.Context, db DB, id ID, state json.RawMessage) error {
	if err := validState(state); err != nil {
		return fmt.Errorf("set state of task %s: %w", id, err)
	}
	return operate(ctx, db, "set state of", query.OperatorSetState, id, state)
}

// validState checks that state is one JSON value, saying where it is not.
func validState(state json.RawMessage) error {
	if len(bytes.TrimSpace(state)) == 0 {
		return errors.New("invalid JSON state: empty (JSON null is the poller's zero value)")
	}
	var v any
	if err := json.Unmarshal(state, &v); err != nil {
		return fmt.Errorf("invalid JSON state: %w", err)
	}
	// Unmarshal takes invalid UTF-8 in strings, which PostgreSQL refuses.
	if !utf8.Valid(state) {
		return errors.New("invalid JSON state: not UTF-8")
	}
	return nil
}

// digestBytes is how much of the SHA-256 a message digest keeps.
const digestBytes = 12

// MessageDigest names a stored message, an entry of Task.Inbox as Get
// returns it: the first 12 bytes of the SHA-256 of the envelope, in hex (24
// digits). Two messages have the same digest only if they are the same
// envelope: same sender, body and time sent. The SQL function
// corotask.message_digest(jsonb) computes the same; corotask show prints it,
// and the web UI's drop form sends it.
func MessageDigest(envelope json.RawMessage) string {
	sum := sha256.Sum256(envelope)
	return hex.EncodeToString(sum[:digestBytes])
}

func validDigest(d string) bool {
	if len(d) != 2*digestBytes {
		return false
	}
	_, err := hex.DecodeString(d)
	return err == nil
}

// operate runs sql, an operator action on task id ($1) with args ($2...),
// and names the action (what) in its error.
func operate(ctx context.Context, db DB, what, sql string, id ID, args ...any) error {
	if id.IsZero() {
		return fmt.Errorf("%s task: no task (zero id)", what)
	}
	if _, err := db.Exec(ctx, sql, append([]any{id}, args...)...); err != nil {
		return fmt.Errorf("%s task %s: %w", what, id, translate(err))
	}
	return nil
}
