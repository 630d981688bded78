// Package envelope reads messages as they are stored in a task's inbox
// columns, for the executor (which hands them to a poll as an inbox.Inbox)
// and the CLI (which prints them).
package envelope

import (
	"encoding/json"
	"time"

	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/tasks"
)

// Envelope is a message as stored in an inbox column: the JSON object
// {"from": <task id or null>, "body": <json>, "done": true, "err": "...",
// "at": <when it was sent>, "trace": <the sender's trace context>}. The
// trace context is read by the executor for its hooks, not here.
type Envelope struct {
	From tasks.ID        `json:"from"`
	Body json.RawMessage `json:"body"`
	Done bool            `json:"done,omitempty"`
	Err  string          `json:"err,omitempty"`
	At   *time.Time      `json:"at,omitempty"`
}

// Decode decodes the stored messages of task, oldest first. A message that
// does not decode into M is kept in its place with DecodeErr (an
// *inbox.DecodeError) and Raw set, so that the poll sees it and can drop it.
// A panic in M's UnmarshalJSON is not recovered: it is a bug of M, and the
// executor fails the poll with it.
func Decode[M any](task tasks.ID, raw [][]byte) []inbox.Message[M] {
	msgs := make([]inbox.Message[M], len(raw))
	for i, r := range raw {
		var env Envelope
		if err := json.Unmarshal(r, &env); err != nil {
			msgs[i] = inbox.Message[M]{DecodeErr: &inbox.DecodeError{Task: task, Position: i, Err: err}, Raw: clone(r)}
			continue
		}
		m := inbox.Message[M]{From: env.From, Done: env.Done, Err: env.Err}
		if env.At != nil {
			m.SentAt = *env.At
		}
		if len(env.Body) > 0 && string(env.Body) != "null" {
			if err := json.Unmarshal(env.Body, &m.Body); err != nil {
				var zero M
				m.Body = zero // what a failed decode left half-filled
				m.DecodeErr = &inbox.DecodeError{Task: task, Position: i, Err: err}
				m.Raw = clone(env.Body)
			}
		}
		msgs[i] = m
	}
	return msgs
}

func clone(b []byte) json.RawMessage {
	if b == nil {
		return json.RawMessage("null")
	}
	return append(json.RawMessage(nil), b...)
}
