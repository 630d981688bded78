package inbox

import (
	"encoding/json"
	"time"

	"github.com/corotask/corotask/tasks"
)

// Message is one message in a task's inbox.
//
// A message that does not decode into M (a poison message: a body of
// another shape, a child's result of the wrong type, an envelope written by
// hand that is not one) is still delivered, in its place in the order, with
// DecodeErr set and its JSON in Raw; Body is then M's zero value. The poll
// decides: Pop it to drop it (it is gone once the poll commits), or leave it
// (Peek) for a later poll. Such a message never fails the poll by itself, so
// one bad message cannot wedge its task.
type Message[M any] struct {
	// From is the sending task; zero for a message from outside any task.
	From tasks.ID
	// Body is the message, decoded into M. In a completion message it is the
	// child's result (DoneWith), or M's zero value.
	Body M
	// Done marks the completion message a parent receives, exactly once, when
	// its child From ends.
	Done bool
	// Err is set in a completion message when the child failed (its last
	// error) or was canceled ("canceled").
	Err string
	// DecodeErr is set, as a *DecodeError, when the message does not decode
	// into M; From, Done and Err are then set when the envelope around the
	// body could be read.
	DecodeErr error
	// Raw is the JSON of a message that does not decode: its body, or the
	// whole stored entry when even the envelope is not one. Nil for a
	// message that decoded.
	Raw json.RawMessage
	// SentAt is when the message was sent (the database's clock); zero for a
	// message stored before envelopes carried it.
	SentAt time.Time
}
