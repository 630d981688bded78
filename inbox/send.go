package inbox

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/corotask/corotask/internal/dberr"
	"github.com/corotask/corotask/internal/jsonenc"
	"github.com/corotask/corotask/tasks"
)

// Send sends body (encoded as JSON; a json.RawMessage is sent as it is) to
// task to, from task from, or from outside any task when from is zero. It is
// the Go face of the SQL function corotask.send_to_task and works on a pool,
// a connection or the caller's transaction (the message is then sent when, and
// only if, that transaction commits).
//
// A sleeping or suspended task is woken at once. Send fails with
// tasks.ErrNotFound for an unknown task, tasks.ErrEnded for a task that is
// done, failed or canceled, and tasks.ErrTooLarge for a body over
// tasks.MaxMessageBytes: a message is never dropped silently.
//
// The trace context of ctx (see tasks.WithTrace), if any, travels with the
// message, and the span of the poll that receives it links to it. Sending
// it calls the four-argument form of send_to_task, on which a role that
// sends messages needs EXECUTE too.
func Send(ctx context.Context, db tasks.DB, to, from tasks.ID, body any) error {
	if to.IsZero() {
		return fmt.Errorf("send message: no recipient (zero task id)")
	}
	b, err := jsonenc.Encode(body)
	if err != nil {
		return fmt.Errorf("send message to %s: %w", to, err)
	}
	if b == nil {
		b = []byte("null")
	}
	if carrier := tasks.TraceFrom(ctx); carrier != nil {
		trace, err := json.Marshal(carrier)
		if err != nil {
			return fmt.Errorf("send message to %s: trace context: %w", to, err)
		}
		_, err = db.Exec(ctx, "SELECT corotask.send_to_task($1, $2, $3::jsonb, $4::jsonb)", to, from, b, trace)
		if err != nil {
			return fmt.Errorf("send message to %s: %w", to, dberr.Translate(err))
		}
		return nil
	}
	if _, err := db.Exec(ctx, "SELECT corotask.send_to_task($1, $2, $3::jsonb)", to, from, b); err != nil {
		return fmt.Errorf("send message to %s: %w", to, dberr.Translate(err))
	}
	return nil
}
