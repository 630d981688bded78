package tasks

import (
	"context"
	"fmt"

	"github.com/corotask/corotask/internal/dberr"
	"github.com/corotask/corotask/internal/query"
)

// Cancel cancels the task and all its live descendants. The task's parent, if
// alive, receives one completion message saying it was canceled; an executor
// running a canceled task cancels that poll's context, and its commit changes
// nothing. It fails with ErrNotFound or ErrEnded. CancelCount does the same
// and says how many tasks it canceled.
func Cancel(ctx context.Context, db DB, id ID) error {
	_, err := CancelCount(ctx, db, id)
	return err
}

// CancelCount is Cancel, and returns how many tasks it canceled: the task and
// its live descendants.
func CancelCount(ctx context.Context, db DB, id ID) (int, error) {
	if id.IsZero() {
		return 0, fmt.Errorf("cancel task: no task (zero id)")
	}
	var n int
	if err := db.QueryRow(ctx, query.OperatorCancel, id).Scan(&n); err != nil {
		return 0, fmt.Errorf("cancel task %s: %w", id, dberr.Translate(err))
	}
	return n, nil
}
