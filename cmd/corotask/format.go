package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/corotask/corotask/internal/envelope"
	"github.com/corotask/corotask/internal/humantime"
	"github.com/corotask/corotask/internal/termsafe"
	"github.com/corotask/corotask/tasks"
)

// taskJSON is a task as `ls --json` and `show --json` print it. The field
// names are part of the CLI's interface: keep them stable. Absent values
// (the parent of a root task, the heartbeat of a task no executor holds, ...)
// are null.
type taskJSON struct {
	ID           tasks.ID        `json:"id"`
	Type         tasks.Type      `json:"type"`
	Key          *string         `json:"key"` // null when the task has none
	Priority     int             `json:"priority"`
	LimitKey     *string         `json:"limit_key"` // null when the task has none
	Status       tasks.Status    `json:"status"`
	Parent       tasks.ID        `json:"parent"` // the zero ID encodes as null
	Root         tasks.ID        `json:"root"`   // the top of its tree: its own ID for a root
	WakeAt       *time.Time      `json:"wake_at"`
	Heartbeat    *time.Time      `json:"heartbeat"`
	InboxLen     int             `json:"inbox_len"`
	InboxNextLen int             `json:"inbox_next_len"`
	Failures     int             `json:"failures"`
	LastError    *string         `json:"last_error"`
	CreatedAt    time.Time       `json:"created_at"`
	DoneAt       *time.Time      `json:"done_at"`
	State        json.RawMessage `json:"state"`
	Result       json.RawMessage `json:"result"`
	Attempts     int             `json:"attempts"`
	ClaimedBy    tasks.ID        `json:"claimed_by"` // the executor holding the task; null when none
	ClaimedAt    *time.Time      `json:"claimed_at"`
	UpdatedAt    time.Time       `json:"updated_at"`
	// LiveChildren counts the children that have not ended; AwaitingChildren
	// is whether the last poll returned AwaitChildren.
	LiveChildren     int  `json:"live_children"`
	AwaitingChildren bool `json:"awaiting_children"`
}

func toJSON(t *tasks.Task) taskJSON {
	j := taskJSON{
		ID: t.ID, Type: t.Type, Status: t.Status, Parent: t.Parent, Root: t.Root,
		WakeAt: t.WakeAt, InboxLen: t.InboxLen, InboxNextLen: t.InboxNextLen,
		Failures: t.Failures, CreatedAt: t.CreatedAt, DoneAt: t.DoneAt,
		State: t.State, Result: t.Result,
		Attempts: t.Attempts, ClaimedBy: t.ClaimedBy, ClaimedAt: t.ClaimedAt, UpdatedAt: t.UpdatedAt,
		LiveChildren: t.LiveChildren, AwaitingChildren: t.AwaitingChildren,
		Priority: t.Priority, LimitKey: optional(t.LimitKey),
	}
	if t.Key != "" {
		j.Key = &t.Key
	}
	if !t.Heartbeat.IsZero() {
		hb := t.Heartbeat
		j.Heartbeat = &hb
	}
	if t.LastError != "" {
		e := t.LastError
		j.LastError = &e
	}
	return j
}

// messageJSON is an inbox message as `show --json` prints it.
type messageJSON struct {
	From   tasks.ID        `json:"from"` // null: from outside any task
	Body   json.RawMessage `json:"body"`
	Done   bool            `json:"done"`    // a child's completion message
	Err    *string         `json:"err"`     // how the child failed, or "canceled"
	SentAt *time.Time      `json:"sent_at"` // null for a message stored before messages carried it
}

// decodeMessage decodes a stored message envelope; a stored value that is
// not an envelope is shown whole, as the body.
func decodeMessage(raw json.RawMessage) messageJSON {
	var env envelope.Envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return messageJSON{Body: raw}
	}
	m := messageJSON{From: env.From, Body: env.Body, Done: env.Done, SentAt: env.At}
	if m.Body == nil {
		m.Body = json.RawMessage("null")
	}
	if env.Err != "" {
		e := env.Err
		m.Err = &e
	}
	return m
}

// writeJSON prints v as indented JSON. encoding/json escapes the C0
// controls, U+2028 and U+2029, but writes the C1 controls and the
// bidirectional overrides as they are: they are escaped too (the JSON
// decodes to the same value).
func writeJSON(w io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := io.WriteString(w, termsafe.JSON(b.String()))
	return err
}

// relative describes t relative to now for people: "in 5s", "3m10s ago",
// "now", or "-" for the zero time or nil.
func relative(t *time.Time, now time.Time) string {
	return cmp.Or(humantime.Relative(t, now), "-")
}

// timestamp prints t in RFC 3339 (UTC, to the second) with its relative
// description, or "-".
func timestamp(t *time.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339) + " (" + relative(t, now) + ")"
}

// idOrDash prints id, or "-" for the zero ID.
func idOrDash(id tasks.ID) string {
	if id.IsZero() {
		return "-"
	}
	return id.String()
}

// prettyJSON indents a JSON value for people, or returns "-" for none. The
// lines after the first are indented by prefix.
func prettyJSON(raw json.RawMessage, prefix string) string {
	if len(raw) == 0 {
		return "-"
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, prefix, "  "); err != nil {
		return oneLine(string(raw))
	}
	return termsafe.JSON(b.String())
}

// compactJSON prints a JSON value on one line.
func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "null"
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return oneLine(string(raw))
	}
	return termsafe.JSON(b.String())
}

// oneLine replaces line breaks and tabs, so that a value stays in its table
// cell, and escapes the characters a terminal acts on (ESC, the other
// controls, the bidirectional overrides: see termsafe). Every string read
// from the database that the CLI prints for people goes through it, or
// through multiLine or the JSON printers above.
func oneLine(s string) string {
	return termsafe.Line(s)
}

// multiLine escapes the characters a terminal acts on in text printed on
// several lines (a stack), keeping its line breaks and tabs.
func multiLine(s string) string {
	return termsafe.Text(s)
}

// plural returns "1 task", "3 tasks".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
