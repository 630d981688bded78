package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/corotask/corotask/internal/dberr"
	"github.com/corotask/corotask/internal/query"
	"github.com/jackc/pgx/v5"
)

// Outcome is how an attempt in a task's history ended.
type Outcome string

const (
	// Committed: the poll committed; Action says what it asked for next.
	Committed Outcome = "committed"
	// PollFailed: the poll returned an error (or its commit was refused).
	PollFailed Outcome = "failed"
	// Panicked: the poll panicked; Stack holds the goroutine's stack.
	Panicked Outcome = "panicked"
	// ClaimLost: the poll's claim was lost before it could commit (taken by
	// another executor after a stall, or not renewed in time).
	ClaimLost Outcome = "claim_lost"
	// PollCanceled: the task was canceled while the poll ran.
	PollCanceled Outcome = "canceled"
	// TakenOver: the executor polling the task stopped renewing its claim
	// (crashed, killed or stalled) and another executor took the task over.
	TakenOver Outcome = "taken_over"
	// Released: the executor gave its claim back without polling to the end
	// (it was shutting down), not counted as a failure.
	Released Outcome = "released"
	// Superseded: the poll returned Done, but messages arrived for the task
	// while it ran: nothing of it was kept, and the task was polled again at
	// once with those messages.
	Superseded Outcome = "superseded"
	// OperatorAction: an operator acted on the task; Action names the action
	// (cancel, retry, reset, restart, drop_message, set_state, or send: a message sent
	// with inbox.SendAsOperator, as corotask send and the web UI do) and
	// Actor the database role.
	OperatorAction Outcome = "operator"
)

// HistoryEntry is one entry in a task's history: an attempt (a poll that
// ended, or an operator action), or a message an operator sent.
type HistoryEntry struct {
	Task ID
	// Attempt is the task's attempt number, from 1 (0 for a message sent
	// before the task's first poll). A poll and an operator action have one
	// of their own; a message an operator sent has the number of the
	// attempt it came during or after, since it does not start one.
	Attempt int
	// Seq is 0 for an attempt's own entry, and numbers the messages
	// operators sent during or after that attempt (Action "send"): 1, 2, ...
	// in the order they were sent. Attempt and Seq order the entries.
	Seq     int
	Outcome Outcome
	// Action is the committed poll's action (yield, sleep, until, suspend,
	// done), or the operator action (see OperatorAction).
	Action string
	// Executor ran the poll (see Executors); Actor is the database role of
	// an operator action.
	Executor   ID
	Actor      string
	ClaimedAt  *time.Time // when the poll's claim was taken; nil for operator actions
	FinishedAt time.Time
	Error      string
	Stack      string
	// Popped, Spawned and Sent count the messages the committed poll took
	// from the inbox, the children it spawned and the messages it sent.
	Popped, Spawned, Sent int
	// StateBytes is the stored size of the task's state afterwards; State is
	// the state itself when the type keeps snapshots (nil otherwise), and
	// the state an operator set (Action "set_state", see SetState).
	StateBytes int
	State      json.RawMessage
	// StateBefore is the state an operator replaced (Action "set_state"; nil
	// when the task had none), nil for every other entry.
	StateBefore json.RawMessage
	// WakeAt is when the task wanted its next poll afterwards (nil:
	// suspended or ended).
	WakeAt *time.Time
	// Message is the envelope an operator dropped from the inbox
	// (DropMessage), or the envelope of the message an operator sent
	// (Action "send"), as the task's inbox received it.
	Message json.RawMessage
}

// Number is how people refer to the entry: its attempt ("3"), followed,
// for a message an operator sent, by its Seq ("3.1").
func (h HistoryEntry) Number() string {
	if h.Seq == 0 {
		return strconv.Itoa(h.Attempt)
	}
	return strconv.Itoa(h.Attempt) + "." + strconv.Itoa(h.Seq)
}

// HistoryOptions selects the entries History returns.
type HistoryOptions struct {
	// Last returns only the last Last entries (a message an operator sent
	// counts as one); 0 returns every entry kept.
	Last int
}

// LastHistory returns the last n entries of the task's history, oldest
// first, as History with Last n does, and whether earlier entries are kept
// too (more): what a page that shows the end of a history says.
func LastHistory(ctx context.Context, db DB, id ID, n int) (h []HistoryEntry, more bool, err error) {
	if n <= 0 {
		return nil, false, fmt.Errorf("task history: n (%d) must be positive", n)
	}
	// One more than asked for, to know whether there are more.
	if h, err = History(ctx, db, id, HistoryOptions{Last: n + 1}); err != nil {
		return nil, false, err
	}
	if len(h) > n {
		return h[1:], true, nil
	}
	return h, false, nil
}

// History returns the task's history, oldest entry first (by Attempt, then
// Seq). An executor keeps each task's first and last attempts
// (Config.HistoryKeepFirst and HistoryKeepLast) and deletes those in
// between, so attempt numbers may jump; a task keeps its last 100 operator
// entries apart from those. It fails with ErrNotFound when the task does not
// exist.
func History(ctx context.Context, db DB, id ID, opts HistoryOptions) ([]HistoryEntry, error) {
	if opts.Last < 0 {
		return nil, fmt.Errorf("task history: Last (%d) must not be negative", opts.Last)
	}
	var exists bool
	if err := db.QueryRow(ctx, query.TaskExists, id).Scan(&exists); err != nil {
		return nil, fmt.Errorf("task history %s: %w", id, dberr.Translate(err))
	}
	if !exists {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	limit := any(nil)
	if opts.Last > 0 {
		limit = opts.Last
	}
	rows, err := db.Query(ctx, query.History, id, limit)
	if err != nil {
		return nil, fmt.Errorf("task history %s: %w", id, dberr.Translate(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (HistoryEntry, error) {
		var h HistoryEntry
		var outcome string
		err := r.Scan(&h.Task, &h.Attempt, &h.Seq, &outcome, &h.Action, &h.Executor, &h.Actor, &h.ClaimedAt, &h.FinishedAt,
			&h.Error, &h.Stack, &h.Popped, &h.Spawned, &h.Sent, &h.StateBytes, &h.State, &h.WakeAt, &h.Message,
			&h.StateBefore)
		h.Outcome = Outcome(outcome)
		return h, err
	})
	if err != nil {
		return nil, fmt.Errorf("task history %s: %w", id, dberr.Translate(err))
	}
	return out, nil
}
