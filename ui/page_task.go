package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/internal/envelope"
	"github.com/corotask/corotask/tasks"
)

// message is an inbox message as the task page shows it.
type message struct {
	Index int
	// Digest names the stored message, so that an action on it (drop) acts
	// on this message and not on another that took its position since.
	Digest string
	From   tasks.ID
	Body   string
	Done   bool
	Err    string
	At     *time.Time
}

func decodeMessages(raw []json.RawMessage) []message {
	out := make([]message, 0, len(raw))
	for i, r := range raw {
		var env envelope.Envelope
		if err := json.Unmarshal(r, &env); err != nil {
			out = append(out, message{Index: i, Digest: tasks.MessageDigest(r), Body: prettyJSON(r)})
			continue
		}
		out = append(out, message{Index: i, Digest: tasks.MessageDigest(r), From: env.From, Body: prettyJSON(env.Body),
			Done: env.Done, Err: env.Err, At: env.At})
	}
	return out
}

// taskPage is the task page's data.
type taskPage struct {
	T         *tasks.Task
	Inbox     []message
	InboxNext []message
	Children  []taskRow
	// ChildCounts are the children in each status; Ended and Total count
	// them for the fan-in progress.
	ChildCounts  map[string]int64
	Ended, Total int64
	// History is the end of the task's history, the latest entry first;
	// HistoryMore says that earlier entries are kept too.
	History     []historyEntry
	HistoryMore bool
	// Holder is the executor holding the task's claim; nil when none does
	// (or it is not registered).
	Holder *executorInfo
	// Flow is what the controls of the task's type are.
	Flow typeFlow
	// SendBody is the message typed in the send form, kept when it was
	// refused.
	SendBody string
	// StateBody is the state typed in the set-state form, kept when it
	// was refused.
	StateBody string
}

// StateText is what the set-state form holds: the state typed when it was
// refused, else the task's state, indented.
func (p *taskPage) StateText() string {
	switch {
	case p.StateBody != "":
		return p.StateBody
	case len(p.T.State) == 0:
		return "null"
	}
	return prettyJSON(p.T.State)
}

// StateWas is the task's state as stored, which the set-state form names
// as the one it replaces (see checkSetState).
func (p *taskPage) StateWas() string { return string(p.T.State) }

// historyEntry is an entry of the task's history as the timeline shows it.
type historyEntry struct {
	tasks.HistoryEntry
	Host    string        // of the executor that ran the poll, when known
	Took    time.Duration // from the claim to the end of the poll
	Dropped string        // the message an operator dropped, indented
	// StateSet and StateReplaced are, for a set_state action, the state
	// set and the one it replaced, indented (StateReplaced "": none).
	StateSet, StateReplaced string
	// SentMessage is the message an operator sent (Action "send").
	SentMessage *message
}

// IsSend reports whether the entry is a message an operator sent.
func (e historyEntry) IsSend() bool {
	return e.Outcome == tasks.OperatorAction && e.Action == "send"
}

// Bad reports whether the attempt failed.
func (e historyEntry) Bad() bool {
	switch e.Outcome {
	case tasks.PollFailed, tasks.Panicked, tasks.ClaimLost, tasks.TakenOver:
		return true
	}
	return false
}

// ErrorText is the attempt's error without the stack that a panic's error
// ends with (Stack holds it).
func (e historyEntry) ErrorText() string {
	if e.Stack == "" {
		return e.Error
	}
	msg, _, _ := strings.Cut(e.Error, "\n\ngoroutine ")
	return msg
}

// maxHistory is how many entries of its history the task page shows.
const maxHistory = 25

// maxChildren is how many children the task page lists.
const maxChildren = 100

func loadTask(ctx context.Context, h *Handler, r *http.Request, tx pgx.Tx, v *view) error {
	id, err := parseTaskID(r)
	if err != nil {
		return err
	}
	t, err := tasks.Get(ctx, tx, id)
	if err != nil {
		return err
	}
	p := &taskPage{T: t, Inbox: decodeMessages(t.Inbox), InboxNext: decodeMessages(t.InboxNext)}
	if p.Flow, err = readTypeFlow(ctx, tx, t.Type); err != nil {
		return err
	}
	if p.Children, p.ChildCounts, err = childList(ctx, tx, id, maxChildren); err != nil {
		return err
	}
	for s, n := range p.ChildCounts {
		p.Total += n
		if tasks.Status(s).Ended() {
			p.Ended += n
		}
	}
	history, more, err := tasks.LastHistory(ctx, tx, id, maxHistory)
	if err != nil {
		return err
	}
	p.HistoryMore = more
	ids := []tasks.ID{t.ClaimedBy}
	for _, h := range history {
		ids = append(ids, h.Executor)
	}
	execs, err := executorsByID(ctx, tx, ids)
	if err != nil {
		return err
	}
	if e, ok := execs[t.ClaimedBy]; ok && !t.ClaimedBy.IsZero() {
		p.Holder = &e
	}
	for i := len(history) - 1; i >= 0; i-- {
		h := historyEntry{HistoryEntry: history[i]}
		if e, ok := execs[h.Executor]; ok {
			h.Host = fmt.Sprintf("%s pid %d", e.Host, e.PID)
		}
		if h.ClaimedAt != nil {
			h.Took = h.FinishedAt.Sub(*h.ClaimedAt)
		}
		if h.Outcome == tasks.OperatorAction && h.Action == "set_state" {
			h.StateSet, h.StateReplaced = prettyJSON(h.State), prettyJSON(h.StateBefore)
		}
		switch {
		case len(h.Message) == 0:
		case h.IsSend():
			h.SentMessage = &decodeMessages([]json.RawMessage{h.Message})[0]
		default:
			h.Dropped = prettyJSON(h.Message)
		}
		p.History = append(p.History, h)
	}
	v.Title, v.P = string(t.Type)+" "+id.String()+" · corotask", p
	return nil
}
