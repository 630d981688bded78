package inbox

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/internal/dberr"
	"github.com/corotask/corotask/internal/jsonenc"
	"github.com/corotask/corotask/internal/query"
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
// tasks.MaxMessageBytes or a trace context over tasks.MaxTraceBytes (so
// that what one message stores is bounded as a whole): a message is never
// dropped silently.
//
// The trace context of ctx (see tasks.WithTrace), if any, travels with the
// message, and the span of the poll that receives it links to it. Sending
// it calls the four-argument form of send_to_task, on which a role that
// sends messages needs EXECUTE too.
//
// Send records nothing in the task's history: it is how programs send. An
// operator's tool sends with SendAsOperator.
func Send(ctx context.Context, db tasks.DB, to, from tasks.ID, body any) error {
	b, trace, err := encode(ctx, to, body)
	if err != nil {
		return err
	}
	if trace != nil {
		_, err = db.Exec(ctx, query.InboxSendTraced, pgx.NamedArgs{"to": to, "from": from, "body": b, "trace": trace})
	} else {
		_, err = db.Exec(ctx, query.InboxSend, to, from, b)
	}
	if err != nil {
		return fmt.Errorf("send message to %s: %w", to, dberr.Translate(err))
	}
	return nil
}

// SendAsOperator sends a message as Send does, and records it in the task's
// history (tasks.History): an entry with Outcome tasks.OperatorAction, Action
// "send", Actor the database role of the session (session_user) and Message
// the envelope sent, in the same transaction. It is for the tools through
// which people act on tasks from outside, as corotask send and the web UI's
// form do, so that the history shows what an operator sent and when, next to
// the other operator actions.
//
// Unlike those actions, it is not refused while an executor holds the task:
// the message waits in inbox_next for the running poll's commit, as any
// other does, and the entry is recorded under the task's current attempt
// (after that attempt's own entry, numbered by HistoryEntry.Seq) without
// raising the attempt number. A refused message records nothing.
//
// It costs more than Send: the history row, and keeping the task's operator
// entries to their last 100 (an index range scan of the task's history), in
// the statement that delivers the message, which holds the task's row lock
// meanwhile. It calls the SQL function corotask.operator_send, on which the
// role needs EXECUTE (see docs/operations.md); programs that send messages
// at volume should use Send.
func SendAsOperator(ctx context.Context, db tasks.DB, to, from tasks.ID, body any) error {
	b, trace, err := encode(ctx, to, body)
	if err != nil {
		return err
	}
	args := pgx.NamedArgs{"to": to, "from": from, "body": b, "trace": trace}
	if _, err := db.Exec(ctx, query.InboxSendAsOperator, args); err != nil {
		return fmt.Errorf("send message to %s: %w", to, dberr.Translate(err))
	}
	return nil
}

// encode returns body as JSON for a message to task to, and the trace
// context of ctx as JSON (nil when it has none).
func encode(ctx context.Context, to tasks.ID, body any) (b, trace []byte, err error) {
	if to.IsZero() {
		return nil, nil, fmt.Errorf("send message: no recipient (zero task id)")
	}
	if b, trace, err = encodeMessage(ctx, body); err != nil {
		return nil, nil, fmt.Errorf("send message to %s: %w", to, err)
	}
	return b, trace, nil
}

// encodeMessage returns body as JSON (null for nil), and the trace context
// of ctx as JSON (nil when it has none).
func encodeMessage(ctx context.Context, body any) (b, trace []byte, err error) {
	if b, err = jsonenc.Encode(body); err != nil {
		return nil, nil, err
	}
	if b == nil {
		b = []byte("null")
	}
	if carrier := tasks.TraceFrom(ctx); carrier != nil {
		if trace, err = json.Marshal(carrier); err != nil {
			return nil, nil, fmt.Errorf("trace context: %w", err)
		}
	}
	return b, trace, nil
}
