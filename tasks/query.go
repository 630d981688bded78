package tasks

import (
	"context"
	"errors"
	"fmt"

	"github.com/corotask/corotask/internal/dberr"
	"github.com/corotask/corotask/internal/query"
	"github.com/jackc/pgx/v5"
)

// Get returns the task with the given ID, with its pending messages, or
// ErrNotFound.
func Get(ctx context.Context, db DB, id ID) (*Task, error) {
	var inbox, next [][]byte
	t, err := scanTask(db.QueryRow(ctx, query.TaskGet, id), &inbox, &next)
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
	if f.Status != "" {
		if _, err := ParseStatus(string(f.Status)); err != nil {
			return nil, err
		}
	}
	if f.Limit < 0 {
		return nil, fmt.Errorf("invalid list limit %d: must not be negative", f.Limit)
	}
	l := query.TaskList{Columns: query.TaskColumns, Type: string(f.Type), Status: string(f.Status),
		Parent: f.Parent, After: f.After, Before: f.Before, Newest: f.NewestFirst, Limit: f.Limit}
	if f.Failing {
		l.Failing = query.WithFailures
	}
	if l.Limit == 0 {
		l.Limit = DefaultListLimit
	}
	sql, args := l.SQL()
	rows, err := db.Query(ctx, sql, args)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", dberr.Translate(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Task, error) { return scanTask(r) })
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", dberr.Translate(err))
	}
	return out, nil
}
