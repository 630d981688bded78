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

// rateTokens is how many tokens the bucket of the rate limit l (a row of
// corotask.rate_limits, whose alias must be l) holds now:
// corotask.rate_limit_tokens spelled out, since on Citus a function of a
// table's row type cannot be called on the rows of a reference table (whose
// rows on a worker are of its shard's row type).
// TestRateTokensMatchesTheFunction checks that both agree.
const rateTokens = `LEAST(l.rate::float8, l.tokens + GREATEST(0::float8, extract(epoch FROM corotask.now() - l.refilled_at)::float8)
		* l.rate / extract(epoch FROM l.per)::float8)`

// ControlsTypes reads the controls of each type that has any, in order:
// task_type, paused_at (NULL: not paused), paused_by, max_running (0:
// none), key_space and rate_limit (”: none), the running polls counted
// toward its maximum, its ready tasks, and those of them held back (all of
// them when it is paused, at its maximum or its rate limit has no whole
// token; else those whose key is at its space's limit). The counts are
// grouped by type (and by key) over the types with controls, each through
// the claim's indexes, rather than counted in a subquery per type: Citus
// runs no subquery of a distributed table correlated with a reference
// table's rows.
const ControlsTypes = `WITH controlled AS MATERIALIZED (
	SELECT ARRAY(SELECT task_type FROM corotask.type_controls) AS types
), run AS (
	SELECT t.task_type, count(*) AS n FROM corotask.tasks t, controlled x
	WHERE t.task_type = ANY (x.types) AND t.claim IS NOT NULL AND t.counted AND t.claim_expires_at >= corotask.now()
	GROUP BY t.task_type
), ready AS (
	SELECT t.task_type, count(*) AS n FROM corotask.tasks t, controlled x
	WHERE t.task_type = ANY (x.types) AND ` + Ready + `
	GROUP BY t.task_type
), full_keys AS (
	-- The keys of each key space at its limit (live claims of its types).
	SELECT c.key_space, t.limit_key FROM corotask.tasks t
	JOIN corotask.type_controls c ON c.task_type = t.task_type AND c.key_space IS NOT NULL
	JOIN corotask.key_limits k ON k.key_space = c.key_space
	WHERE t.limit_key IS NOT NULL AND t.claim IS NOT NULL AND t.claim_expires_at >= corotask.now()
	GROUP BY c.key_space, t.limit_key, k.max_running
	HAVING count(*) >= k.max_running
), keyed AS (
	-- The ready tasks of each type whose key is at its space's limit.
	SELECT t.task_type, count(*) AS n FROM corotask.tasks t
	JOIN corotask.type_controls c ON c.task_type = t.task_type
	JOIN full_keys f ON f.key_space = c.key_space AND f.limit_key = t.limit_key
	WHERE ` + Ready + `
	GROUP BY t.task_type
)
SELECT c.task_type, c.paused_at, coalesce(c.paused_by, ''), coalesce(c.max_running, 0),
	coalesce(c.key_space, ''), coalesce(c.rate_limit, ''), coalesce(run.n, 0), coalesce(ready.n, 0),
	CASE WHEN c.paused_at IS NOT NULL OR coalesce(run.n, 0) >= c.max_running
	          OR ` + rateTokens + ` < 1 THEN coalesce(ready.n, 0)
	     WHEN k.max_running IS NULL THEN 0
	     ELSE coalesce(keyed.n, 0)
	END
FROM corotask.type_controls c
LEFT JOIN corotask.rate_limits l ON l.name = c.rate_limit
LEFT JOIN corotask.key_limits k ON k.key_space = c.key_space
LEFT JOIN run ON run.task_type = c.task_type
LEFT JOIN ready ON ready.task_type = c.task_type
LEFT JOIN keyed ON keyed.task_type = c.task_type
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
const ControlsRateLimits = `SELECT l.name, l.rate, (extract(epoch FROM l.per) * 1000000)::bigint,
	` + rateTokens + `,
	ARRAY(SELECT c.task_type FROM corotask.type_controls c WHERE c.rate_limit = l.name ORDER BY 1)
FROM corotask.rate_limits l ORDER BY 1`

// ControlChanges reads the last $1 changes of the controls, the latest
// first: when, the action, its subject (a type, key space, rate limit or
// task), its detail and the database role that made it.
const ControlChanges = `SELECT at, action, subject, coalesce(detail, ''), by_role
FROM corotask.control_history ORDER BY id DESC LIMIT $1`
