package query

// The heartbeat's statements, on the claims $1 (task IDs) and $2 (claim
// tokens), two arrays of one entry per claim.
const (
	// HeartbeatRenew renews the claims that still match, for $3 seconds,
	// and returns their task IDs. A row another transaction holds (the
	// poll's own commit, most likely) is skipped rather than waited for: a
	// renewal never blocks, so it cannot deadlock with commits. A skipped
	// claim that still matches is kept and tried again at the next
	// interval.
	HeartbeatRenew = `WITH locked AS MATERIALIZED (
		SELECT t.task_id FROM unnest($1::uuid[], $2::uuid[]) AS c(task_id, claim)
		JOIN corotask.tasks t ON t.task_id = c.task_id AND t.claim = c.claim
		FOR UPDATE OF t SKIP LOCKED
	)
	UPDATE corotask.tasks t SET heartbeat = now(), claim_expires_at = now() + make_interval(secs => $3)
	FROM locked WHERE t.task_id = locked.task_id
	RETURNING t.task_id`
	// HeartbeatHeld returns the task IDs of the claims that still match,
	// without locking: those a renewal skipped that are still ours.
	HeartbeatHeld = `SELECT t.task_id FROM unnest($1::uuid[], $2::uuid[]) AS c(task_id, claim)
		JOIN corotask.tasks t ON t.task_id = c.task_id AND t.claim = c.claim`
	// HeartbeatCanceled returns those of the tasks $1 that were canceled.
	HeartbeatCanceled = `SELECT task_id FROM corotask.tasks
		WHERE task_id = ANY ($1::uuid[]) AND outcome = 'canceled'`
)
