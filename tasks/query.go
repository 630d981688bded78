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
	t, err := scanWithMessages(db.QueryRow(ctx, query.TaskGet, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("get task %s: %w", id, dberr.Translate(err))
	}
	return t, nil
}

// scanWithMessages reads a task and its pending messages from row (see
// query.TaskGet).
func scanWithMessages(row pgx.Row) (*Task, error) {
	var inbox, next [][]byte
	t, err := scanTask(row, &inbox, &next)
	if err != nil {
		return nil, err
	}
	for _, m := range inbox {
		t.Inbox = append(t.Inbox, m)
	}
	for _, m := range next {
		t.InboxNext = append(t.InboxNext, m)
	}
	return t, nil
}

// GetByKey returns the live task of type typ with key key (see Spec.Key),
// as Get returns a task, or ErrNotFound when no live task of the type has
// the key (none ever had, or the last one has ended).
func GetByKey(ctx context.Context, db DB, typ Type, key string) (*Task, error) {
	if err := ValidateKey(key); err != nil {
		return nil, fmt.Errorf("get task by key: %w", err)
	}
	t, err := scanWithMessages(db.QueryRow(ctx, query.TaskGetByKey, string(typ), key))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: no live task of type %q has key %q", ErrNotFound, typ, key)
	}
	if err != nil {
		return nil, fmt.Errorf("get task of type %q by key %q: %w", typ, key, dberr.Translate(err))
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
	// Key returns only tasks with this key (of any type, live or ended).
	Key string
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
		Parent: f.Parent, Key: f.Key, After: f.After, Before: f.Before, Newest: f.NewestFirst, Limit: f.Limit}
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
