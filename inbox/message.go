package inbox

import (
	"encoding/json"
	"time"

	"github.com/corotask/corotask/tasks"
)

// Message is one message in a task's inbox.
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
	// SentAt is when the message was sent (the database's clock); zero for a
	// message stored before envelopes carried it.
	SentAt time.Time
}

// Envelope is a message as stored in an inbox column: the JSON object
// {"from": <task id or null>, "body": <json>, "done": true, "err": "...",
// "at": <when it was sent>}.
type Envelope struct {
	From tasks.ID        `json:"from"`
	Body json.RawMessage `json:"body"`
	Done bool            `json:"done,omitempty"`
	Err  string          `json:"err,omitempty"`
	At   *time.Time      `json:"at,omitempty"`
}
