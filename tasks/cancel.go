package tasks

import (
	"context"
	"fmt"

	"github.com/corotask/corotask/internal/dberr"
)

// Cancel cancels the task and all its live descendants. The task's parent, if
// alive, receives one completion message saying it was canceled; an executor
// running a canceled task cancels that poll's context, and its commit changes
// nothing. It fails with ErrNotFound or ErrEnded. (The SQL function
// corotask.cancel_task, which Cancel calls, also returns how many tasks it
// canceled.)
func Cancel(ctx context.Context, db DB, id ID) error {
	if id.IsZero() {
		return fmt.Errorf("cancel task: no task (zero id)")
	}
	if _, err := db.Exec(ctx, `SELECT corotask.cancel_task($1)`, id); err != nil {
		return fmt.Errorf("cancel task %s: %w", id, dberr.Translate(err))
	}
	return nil
}
