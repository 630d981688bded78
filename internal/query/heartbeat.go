package query

// The heartbeat's statements, on the claims $1 (task IDs) and $2 (claim
// tokens), two arrays of one entry per claim.
const (
	// HeartbeatRenew renews the claims that still match, for $3 seconds,
	// and returns their task IDs. A row another transaction holds (the
	// poll's own commit, most likely) is skipped rather than waited for: a
	// renewal never blocks, so it cannot deadlock with commits. A skipped
	// claim that still matches is kept and tried again at the next
	// interval. An expired claim that still matches is renewed (nobody took
	// it over), but for a claim that counts toward a flow-control limit (a
	// type's max_running, tasks.counted, or a key space's, a limit key):
	// once expired it stopped counting, and another poll may have taken its
	// slot, so it is lost (see HeartbeatHeld), never revived past the limit.
	// (A claim stops counting a second after its expiry: see
	// ClaimControlled. A renewal that began before it ends within that.)
	HeartbeatRenew = `WITH locked AS MATERIALIZED (
		SELECT t.task_id FROM unnest($1::uuid[], $2::uuid[]) AS c(task_id, claim)
		JOIN corotask.tasks t ON t.task_id = c.task_id AND t.claim = c.claim
		WHERE ` + heartbeatRenewable + `
		FOR UPDATE OF t SKIP LOCKED
	)
	UPDATE corotask.tasks t SET heartbeat = now(), claim_expires_at = now() + make_interval(secs => $3)
	FROM locked WHERE t.task_id = locked.task_id
	RETURNING t.task_id`
	// HeartbeatHeld returns the task IDs of the claims that still match,
	// without locking: those a renewal skipped that are still ours.
	HeartbeatHeld = `SELECT t.task_id FROM unnest($1::uuid[], $2::uuid[]) AS c(task_id, claim)
		JOIN corotask.tasks t ON t.task_id = c.task_id AND t.claim = c.claim
		WHERE ` + heartbeatRenewable
	// HeartbeatCanceled returns those of the tasks $1 that were canceled.
	HeartbeatCanceled = `SELECT task_id FROM corotask.tasks
		WHERE task_id = ANY ($1::uuid[]) AND outcome = 'canceled'`
)

// heartbeatRenewable is what a claim t must be to be renewed (and held):
// not expired, or expired but counting toward no flow-control limit (see
// HeartbeatRenew).
const heartbeatRenewable = `t.claim_expires_at >= now() OR t.counted IS NOT TRUE AND (t.limit_key IS NULL OR NOT EXISTS (
			SELECT 1 FROM corotask.type_controls c WHERE c.task_type = t.task_type AND c.key_space IS NOT NULL))`
