package inbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/internal/dberr"
	"github.com/corotask/corotask/internal/jsonenc"
	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/tasks"
)

// SendToKey sends body (encoded as JSON, as Send encodes it) from outside
// any task to the live task of type typ with key key (see tasks.Spec.Key),
// and returns that task's ID. When no live task of the type has the key,
// it creates one first, a root task with initial state state (encoded as
// JSON; nil: the poller's zero value), due at once, whose first inbox
// message is body. It is the Go face of the SQL function
// corotask.send_to_key, which triggers may call too, and works on a pool,
// a connection or the caller's transaction (the task is created and the
// message sent when, and only if, that transaction commits).
//
// Senders racing on a key that no live task holds create one task between
// them, and every message reaches it; a message sent while the key's task
// is ending goes to a new task with that key. Under REPEATABLE READ or
// SERIALIZABLE isolation a sender that raced another fails with a
// serialization failure (SQLSTATE 40001), to be retried as such.
//
// When typ has a key window (see tasks.SetKeyWindow) and the key's last
// task ended within it, no live task has the key and none is created: it
// fails with tasks.ErrEnded naming that task, as Send to an ended task does.
//
// It fails with an error naming the problem for an invalid type or key
// (see tasks.Type.Validate and tasks.ValidateKey), and with
// tasks.ErrTooLarge for a body over tasks.MaxMessageBytes or a trace
// context over tasks.MaxTraceBytes. The trace context of ctx, if any,
// travels with the message and is kept with a task it creates.
func SendToKey(ctx context.Context, db tasks.DB, typ tasks.Type, key string, body, state any) (tasks.ID, error) {
	if err := typ.Validate(); err != nil {
		return tasks.ID{}, fmt.Errorf("send message by key: %w", err)
	}
	if err := tasks.ValidateKey(key); err != nil {
		return tasks.ID{}, fmt.Errorf("send message by key to type %q: %w", typ, err)
	}
	what := fmt.Sprintf("send message to the task of type %q with key %q", typ, key)
	b, trace, err := encodeMessage(ctx, body)
	if err != nil {
		return tasks.ID{}, fmt.Errorf("%s: %w", what, err)
	}
	st, err := jsonenc.Encode(state)
	if err != nil {
		return tasks.ID{}, fmt.Errorf("%s: state: %w", what, err)
	}
	var id tasks.ID
	args := pgx.NamedArgs{"type": string(typ), "key": key, "body": b, "state": st, "trace": trace}
	if err := db.QueryRow(ctx, query.InboxSendToKey, args).Scan(&id); err != nil {
		return tasks.ID{}, fmt.Errorf("%s: %w", what, dberr.Translate(err))
	}
	return id, nil
}
