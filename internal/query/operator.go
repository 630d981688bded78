package query

// Operator actions on task $1, each one statement that calls the SQL
// function of the action (see sql/functions/operator.sql and cancel.sql),
// which locks the task's row and records the action in its history.
const (
	// OperatorCancel cancels the task and its live descendants; it returns
	// how many tasks it canceled.
	OperatorCancel = `SELECT corotask.cancel_task($1)`
	// OperatorRetry makes a waiting task ready now.
	OperatorRetry = `SELECT corotask.retry_task($1)`
	// OperatorResetFailures sets the task's failures back to zero.
	OperatorResetFailures = `SELECT corotask.reset_failures($1)`
	// OperatorRestart brings a failed task back to life.
	OperatorRestart = `SELECT corotask.restart_task($1)`
	// OperatorDropMessage removes the message at position $2 of the task's
	// inbox if its digest is $3, and returns its envelope.
	OperatorDropMessage = `SELECT corotask.drop_message($1, $2, $3)`
	// OperatorSetState replaces the task's state with $2 (jsonb), and
	// returns the state it replaced.
	OperatorSetState = `SELECT corotask.set_task_state($1, $2::jsonb)`
)
