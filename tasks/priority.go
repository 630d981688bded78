package tasks

import (
	"context"
	"fmt"

	"github.com/corotask/corotask/internal/query"
)

// SetPriority sets the priority of task id: claims take the ready tasks of
// a type by priority, the highest first, then the oldest. It is an
// operator action, fenced as the others are (see Retry): it raises the
// task's attempt number and is recorded in its history (Action "priority")
// with the database role of the session, and in corotask.control_history
// with the priority it replaced. A priority outside 0..MaxPriority is
// refused; so are ErrNotFound, ErrEnded and ErrRunning. It calls the SQL
// function corotask.set_task_priority(uuid, integer), on which a role that
// sets priorities needs EXECUTE.
func SetPriority(ctx context.Context, db DB, id ID, priority int) error {
	if err := ValidatePriority(priority); err != nil {
		return fmt.Errorf("set priority of task %s: %w", id, err)
	}
	return operate(ctx, db, "set priority of", query.OperatorSetPriority, id, priority)
}
