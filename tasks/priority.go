package tasks

import (
	"context"
	"fmt"

	"github.com/corotask/corotask/internal/query"
)

// MaxPriority is the highest priority a task may have (see Spec.Priority):
// priorities run from 0, the default and the lowest, to MaxPriority.
const MaxPriority = 32767

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
	if priority < 0 || priority > MaxPriority {
		return fmt.Errorf("set priority of task %s: %d out of range: from 0 (the lowest) to %d", id, priority, MaxPriority)
	}
	return operate(ctx, db, "set priority of", query.OperatorSetPriority, id, priority)
}
