package tasks

import (
	"context"
	"fmt"
)

// Cancel cancels the task and all its live descendants. The task's parent, if
// alive, receives one completion message saying it was canceled; an executor
// running a canceled task cancels that poll's context, and its commit changes
// nothing. It fails with ErrNotFound or ErrEnded.
func Cancel(ctx context.Context, db DB, id ID) error {
	_, err := CancelTree(ctx, db, id)
	return err
}

// CancelTree is Cancel, and also returns how many tasks it canceled (the task
// and its live descendants).
func CancelTree(ctx context.Context, db DB, id ID) (int, error) {
	if id.IsZero() {
		return 0, fmt.Errorf("cancel task: no task (zero id)")
	}
	var n int
	if err := db.QueryRow(ctx, `SELECT corotask.cancel_task($1)`, id).Scan(&n); err != nil {
		return 0, fmt.Errorf("cancel task %s: %w", id, TranslateError(err))
	}
	return n, nil
}
