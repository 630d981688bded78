package query

// History returns the last $2 entries (NULL: all) of task $1's history,
// oldest first (by attempt, then seq): task_id, attempt, seq, outcome,
// action, executor_id, actor, claimed_at, finished_at, error, stack, popped,
// spawned, sent, state_bytes, state, wake_at, message and state_before, the
// text and counts that may be missing as empty strings and zeros.
const History = `SELECT * FROM (
	SELECT task_id, attempt, seq, outcome, coalesce(action, ''), executor_id, coalesce(actor, ''),
	       claimed_at, finished_at, coalesce(error, ''), coalesce(stack, ''),
	       coalesce(popped, 0), coalesce(spawned, 0), coalesce(sent, 0), coalesce(state_bytes, 0),
	       state, wake_at, message, state_before
	FROM corotask.history WHERE task_id = $1
	ORDER BY attempt DESC, seq DESC LIMIT $2) h
ORDER BY attempt, seq`
