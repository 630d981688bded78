package tasks

import (
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"
)

// Task is a stored task, as Get and List return it.
type Task struct {
	ID, Parent ID
	Type       Type
	Status     Status
	// State is the poller's JSON state (null: the poller's zero value);
	// Result is what DoneWith returned.
	State, Result json.RawMessage
	WakeAt        *time.Time // nil: suspended, or ended
	// Heartbeat is the last renewal of the current claim; zero when no
	// executor holds the task.
	Heartbeat              time.Time
	InboxLen, InboxNextLen int
	Failures               int
	LastError              string
	CreatedAt              time.Time
	DoneAt                 *time.Time
	// Attempts is the number of the task's last attempt: its claims, and
	// operator actions on it (see History).
	Attempts int
	// LiveChildren is how many of the task's children have not ended (kept
	// while the task lives; for an ended task, as it was when it ended), and
	// AwaitingChildren whether it lives and its last poll returned
	// AwaitChildren (a suspended task that awaits its children is woken by
	// the last one's end, by one that ends without a result, or by another
	// message); an ended task awaits nothing.
	LiveChildren     int
	AwaitingChildren bool
	// ClaimedBy is the executor holding the task's claim (see Executors),
	// and ClaimedAt when it claimed it; zero when no executor holds it.
	ClaimedBy ID
	ClaimedAt *time.Time
	// UpdatedAt is when the task last changed hands: its creation, its last
	// claim, the end of its last recorded attempt (see History), or its end,
	// whichever is latest. Messages arriving do not count (those operators
	// sent, recorded in the history, neither).
	UpdatedAt time.Time
	// Key is the task's key (see Spec.Key); empty when it has none.
	Key string
	// Priority orders the claims of its type: the higher first, then the
	// oldest (0, the default, is the lowest; see SetPriority).
	Priority int
	// LimitKey is the task's key in its type's key space (see SetKeyLimit);
	// empty when it has none.
	LimitKey string
	// Root is the task at the top of the task's workflow tree: ID itself for
	// a task created without a parent, its parent's Root for a child. Every
	// task of a tree has the same, whatever becomes of the root; a database
	// split by workflow tree keeps a tree on one node by it (see
	// docs/scaling.md).
	Root ID
	// Inbox and InboxNext are the pending messages, oldest first, each a JSON
	// object {"from": ..., "body": ..., ...}. Only Get fills them.
	Inbox, InboxNext []json.RawMessage
}

// scanTask reads a task from row, whose columns are query.TaskColumns and
// then extra.
func scanTask(row pgx.Row, extra ...any) (*Task, error) {
	var t Task
	var typ, status string
	var heartbeat *time.Time
	dest := append([]any{&t.ID, &t.Parent, &typ, &status, &t.State, &t.Result,
		&t.WakeAt, &heartbeat, &t.InboxLen, &t.InboxNextLen, &t.Failures,
		&t.LastError, &t.CreatedAt, &t.DoneAt, &t.Attempts, &t.LiveChildren, &t.AwaitingChildren, &t.ClaimedBy, &t.ClaimedAt, &t.UpdatedAt, &t.Key,
		&t.Priority, &t.LimitKey, &t.Root}, extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	t.Type, t.Status = Type(typ), Status(status)
	if heartbeat != nil {
		t.Heartbeat = *heartbeat
	}
	return &t, nil
}
