package query

// Flow control: the changes of the controls, each one statement that calls
// the SQL function of the change (see sql/functions/controls.sql), which
// validates it, locks what it changes and records it in
// corotask.control_history; and the reads of the controls.
const (
	// ControlPause pauses type $1 ($2: accept a type nobody knows yet).
	ControlPause = `SELECT corotask.pause_type($1, $2)`
	// ControlResume resumes type $1.
	ControlResume = `SELECT corotask.resume_type($1)`
	// ControlSetMaxRunning sets the maximum of running polls of type $1 to
	// $2 ($3: accept a type nobody knows yet).
	ControlSetMaxRunning = `SELECT corotask.set_max_running($1, $2, $3)`
	// ControlClearMaxRunning removes the maximum of running polls of type
	// $1.
	ControlClearMaxRunning = `SELECT corotask.clear_max_running($1)`
	// ControlSetKeyLimit sets the maximum of running tasks per key of key
	// space @space to @max, over the types @types (@allow_new: accept types
	// nobody knows yet).
	ControlSetKeyLimit = `SELECT corotask.set_key_limit(@space, @max, @types::text[], @allow_new)`
	// ControlClearKeyLimit removes key space $1.
	ControlClearKeyLimit = `SELECT corotask.clear_key_limit($1)`
	// ControlSetRateLimit sets rate limit @name to @rate takes per @per_us
	// microseconds, taken from by the poll starts of @types (@allow_new:
	// accept types nobody knows yet).
	ControlSetRateLimit = `SELECT corotask.set_rate_limit(@name, @rate, @per_us::bigint * interval '1 microsecond',
	@types::text[], @allow_new)`
	// ControlClearRateLimit removes rate limit $1.
	ControlClearRateLimit = `SELECT corotask.clear_rate_limit($1)`
	// ControlAcquire takes $2 tokens of rate limit $1, and returns how long
	// to wait, in microseconds, when it took none (0 when it took them).
	ControlAcquire = `SELECT (extract(epoch FROM corotask.acquire_tokens($1, $2)) * 1000000)::bigint`
	// OperatorSetPriority sets the priority of task $1 to $2 (an operator
	// action), and returns the priority it replaced.
	OperatorSetPriority = `SELECT corotask.set_task_priority($1, $2)`
)

// runningOfKey counts the running tasks (live claims) whose limit_key is
// that of t, among the types of the key space of c (a type_controls row).
const runningOfKey = `(SELECT count(*) FROM corotask.tasks u
		JOIN corotask.type_controls uc ON uc.task_type = u.task_type AND uc.key_space = c.key_space
		WHERE u.limit_key = t.limit_key AND u.claim IS NOT NULL AND u.claim_expires_at >= corotask.now())`

// ControlsTypes reads the controls of each type that has any, in order:
// task_type, paused_at (NULL: not paused), paused_by, max_running (0:
// none), key_space and rate_limit (”: none), the running polls counted
// toward its maximum, its ready tasks, and those of them held back (all of
// them when it is paused, at its maximum or its rate limit has no whole
// token; else those whose key is at its space's limit). Each type's counts
// read the claim's indexes.
const ControlsTypes = `SELECT c.task_type, c.paused_at, coalesce(c.paused_by, ''), coalesce(c.max_running, 0),
	coalesce(c.key_space, ''), coalesce(c.rate_limit, ''), run.n, ready.n,
	CASE WHEN c.paused_at IS NOT NULL OR run.n >= c.max_running
	          OR corotask.rate_limit_tokens(r, corotask.now()) < 1 THEN ready.n
	     WHEN k.max_running IS NULL THEN 0
	     ELSE (SELECT count(*) FROM corotask.tasks t
	           WHERE t.task_type = c.task_type AND ` + Ready + ` AND t.limit_key IS NOT NULL
	             AND ` + runningOfKey + ` >= k.max_running)
	END
FROM corotask.type_controls c
LEFT JOIN corotask.rate_limits r ON r.name = c.rate_limit
LEFT JOIN corotask.key_limits k ON k.key_space = c.key_space
CROSS JOIN LATERAL (SELECT count(*) AS n FROM corotask.tasks t
	WHERE t.task_type = c.task_type AND t.claim IS NOT NULL AND t.counted AND t.claim_expires_at >= corotask.now()) run
CROSS JOIN LATERAL (SELECT count(*) AS n FROM corotask.tasks t WHERE t.task_type = c.task_type AND ` + Ready + `) ready
ORDER BY c.task_type`

// ControlsKeySpaces reads the key spaces, in order: key_space, max_running
// and the types that count in it, in order.
const ControlsKeySpaces = `SELECT k.key_space, k.max_running,
	ARRAY(SELECT c.task_type FROM corotask.type_controls c WHERE c.key_space = k.key_space ORDER BY 1)
FROM corotask.key_limits k ORDER BY 1`

// ControlsKeysAtLimit reads the keys of key space $1 at its limit (as many
// running tasks as its maximum, or more), at most $2 of them, those with the
// most ready tasks waiting first: limit_key, its running tasks, its ready
// tasks, and how many keys are at the limit in all.
const ControlsKeysAtLimit = `WITH running AS (
	SELECT t.limit_key AS key, count(*) AS n
	FROM corotask.tasks t JOIN corotask.type_controls c ON c.task_type = t.task_type AND c.key_space = $1
	WHERE t.limit_key IS NOT NULL AND t.claim IS NOT NULL AND t.claim_expires_at >= corotask.now()
	GROUP BY 1
	HAVING count(*) >= (SELECT k.max_running FROM corotask.key_limits k WHERE k.key_space = $1)
), waiting AS (
	SELECT t.limit_key AS key, count(*) AS n
	FROM corotask.tasks t JOIN corotask.type_controls c ON c.task_type = t.task_type AND c.key_space = $1
	WHERE t.limit_key IN (SELECT key FROM running) AND ` + Ready + `
	GROUP BY 1
)
SELECT r.key, r.n, coalesce(w.n, 0), count(*) OVER ()
FROM running r LEFT JOIN waiting w ON w.key = r.key
ORDER BY 3 DESC, 1
LIMIT $2`

// ControlsRateLimits reads the rate limits, in order: name, rate, per in
// microseconds, the tokens its bucket holds now, and the types that take
// from it, in order.
const ControlsRateLimits = `SELECT r.name, r.rate, (extract(epoch FROM r.per) * 1000000)::bigint,
	corotask.rate_limit_tokens(r, corotask.now()),
	ARRAY(SELECT c.task_type FROM corotask.type_controls c WHERE c.rate_limit = r.name ORDER BY 1)
FROM corotask.rate_limits r ORDER BY 1`
