package tasks

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/corotask/corotask/internal/dberr"
	"github.com/jackc/pgx/v5"
)

// Get returns the task with the given ID, with its pending messages, or
// ErrNotFound.
func Get(ctx context.Context, db DB, id ID) (*Task, error) {
	var inbox, next [][]byte
	// The inbox holds the task's messages up to msg_seq - inbox_next_len;
	// those after it arrived while an executor held the task.
	t, err := scanTask(db.QueryRow(ctx, `SELECT `+taskColumns+`,
			ARRAY(SELECT m.envelope FROM corotask.messages m
				WHERE m.task_id = t.task_id AND m.seq > t.msg_popped AND m.seq <= t.msg_seq - t.inbox_next_len
				ORDER BY m.seq),
			ARRAY(SELECT m.envelope FROM corotask.messages m
				WHERE m.task_id = t.task_id AND m.seq > t.msg_seq - t.inbox_next_len
				ORDER BY m.seq)
		FROM corotask.tasks t WHERE t.task_id = $1`, id), &inbox, &next)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("get task %s: %w", id, dberr.Translate(err))
	}
	for _, m := range inbox {
		t.Inbox = append(t.Inbox, m)
	}
	for _, m := range next {
		t.InboxNext = append(t.InboxNext, m)
	}
	return t, nil
}

// DefaultListLimit is how many tasks List returns when Filter.Limit is zero.
const DefaultListLimit = 100

// Filter selects the tasks List returns. Zero fields do not filter.
type Filter struct {
	Type   Type
	Status Status
	Parent ID
	// Failing returns only tasks that failed for good, or whose last poll
	// failed (Failures > 0).
	Failing bool
	// After returns only tasks whose ID is greater: pass the last ID of a page
	// to get the next one.
	After ID
	// Before returns only tasks whose ID is smaller: with NewestFirst, pass
	// the last ID of a page to get the next one.
	Before ID
	// NewestFirst lists the newest tasks first.
	NewestFirst bool
	// Limit is the most tasks returned; 0 means DefaultListLimit.
	Limit int
}

// List returns the tasks that match f, oldest first (by ID, which orders by
// creation time) or newest first, without their messages. It walks the
// primary key in that order; a filter on Status, Type or Failing is checked
// on each task walked (a scan of the table when few tasks match), and a
// filter on Parent uses the parent index.
func List(ctx context.Context, db DB, f Filter) ([]*Task, error) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if f.Type != "" {
		add("t.task_type = $%d", string(f.Type))
	}
	if f.Status != "" {
		if _, err := ParseStatus(string(f.Status)); err != nil {
			return nil, err
		}
		add("corotask.status(t) = $%d", string(f.Status))
	}
	if !f.Parent.IsZero() {
		add("t.parent_id = $%d", f.Parent)
	}
	if f.Failing {
		where = append(where, "(t.failures > 0 OR t.outcome = 'failed')")
	}
	if !f.After.IsZero() {
		add("t.task_id > $%d", f.After)
	}
	if !f.Before.IsZero() {
		add("t.task_id < $%d", f.Before)
	}
	if f.Limit < 0 {
		return nil, fmt.Errorf("invalid list limit %d: must not be negative", f.Limit)
	}
	limit := f.Limit
	if limit == 0 {
		limit = DefaultListLimit
	}
	q := `SELECT ` + taskColumns + ` FROM corotask.tasks t`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	args = append(args, limit)
	order := "t.task_id"
	if f.NewestFirst {
		order += " DESC"
	}
	q += fmt.Sprintf(" ORDER BY %s LIMIT $%d", order, len(args))
	rows, err := db.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", dberr.Translate(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Task, error) { return scanTask(r) })
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", dberr.Translate(err))
	}
	return out, nil
}
