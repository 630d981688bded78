package tasks

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/internal/dberr"
	"github.com/corotask/corotask/internal/query"
)

// ControlChange is one change of the flow controls, as
// corotask.control_history records it.
type ControlChange struct {
	At time.Time
	// Action is pause, resume, max_running, key_limit, rate_limit or
	// priority.
	Action string
	// Subject is the task type, key space, rate limit or task changed.
	Subject string
	// Detail says what was set (e.g. "20", "2 per key, types a, b",
	// "cleared").
	Detail string
	// By is the database role of the session that made the change.
	By string
}

// ControlChanges returns the last n changes of the flow controls, the
// latest first: who paused a type and when, what limit was set.
func ControlChanges(ctx context.Context, db DB, n int) ([]ControlChange, error) {
	if n < 1 {
		return nil, fmt.Errorf("control changes: n must be at least 1, not %d", n)
	}
	rows, err := db.Query(ctx, query.ControlChanges, n)
	if err != nil {
		return nil, fmt.Errorf("control changes: %w", dberr.Translate(err))
	}
	var out []ControlChange
	var c ControlChange
	_, err = pgx.ForEachRow(rows, []any{&c.At, &c.Action, &c.Subject, &c.Detail, &c.By}, func() error {
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("control changes: %w", dberr.Translate(err))
	}
	return out, nil
}
