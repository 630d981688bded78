package query

// Messages to a task, through corotask.send_to_task, corotask.send_to_key
// and corotask.operator_send (sql/functions/api.sql and history.sql).
const (
	// InboxSend sends the body $3 (jsonb) to task $1 from task $2 (NULL:
	// from outside any task).
	InboxSend = `SELECT corotask.send_to_task($1, $2, $3::jsonb)`
	// InboxSendTraced is InboxSend with the trace context of the sender,
	// through the four-argument form of send_to_task: the message @body to
	// task @to from task @from, with @trace.
	InboxSendTraced = `SELECT corotask.send_to_task(@to, @from, @body::jsonb, @trace::jsonb)`
	// InboxSendAsOperator sends the message @body to task @to from task
	// @from, with the trace context @trace (NULL: none), and records it in
	// the task's history as an operator's.
	InboxSendAsOperator = `SELECT corotask.operator_send(@to, @from, @body::jsonb, @trace::jsonb)`
	// InboxSendToKey sends the message @body to the live task of type @type
	// with key @key, through corotask.send_to_key, creating it with state
	// @state (NULL: the zero value) when there is none, with the trace
	// context @trace (NULL: none); it returns the task's ID.
	InboxSendToKey = `SELECT corotask.send_to_key(@type, @key, @body::jsonb, @state::jsonb, @trace::jsonb)`
)
