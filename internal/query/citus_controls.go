package query

import "strings"

// Flow controls on Citus. A type's maximum of running polls and its rate
// limit count over every shard, and a claim on one shard cannot count
// them: an executor claims the types with controls in turns with every
// other, under the controls lock (corotask.controls_lock_key) held as a
// session lock on the coordinator (CitusControlsLock): it reads their
// controls, the running polls counted toward their maximums over every
// shard (CitusCountedRunning) and the tokens of their rate limits, reserves
// tokens (CitusTakeTokens), claims shard by shard within what is left
// (ClaimShardCounted), gives back the tokens it did not use, and unlocks.
// The lock is the one that a change of the controls (corotask.control_begin)
// takes: a pause or a new maximum waits for the claim in flight, and every
// later claim sees it. Key spaces (a limit per key over the tasks of
// several types) are not claimed on Citus.

// CitusControlledTypes reads which of the types $1 have flow controls, and
// which of those have a key space.
const CitusControlledTypes = `SELECT coalesce(array_agg(task_type), '{}'),
       coalesce(array_agg(task_type) FILTER (WHERE key_space IS NOT NULL), '{}')
FROM corotask.type_controls WHERE task_type = ANY ($1::text[])`

// CitusControlsLock and CitusControlsUnlock take and release the controls
// lock as a session lock (see above). While it holds the lock, the session
// ends if it stays idle for $1 milliseconds (idle_session_timeout): an
// executor frozen between two of its statements would otherwise hold every
// claim of a controlled type, and every change of the controls, until it
// woke.
const (
	CitusControlsLock   = `SELECT pg_advisory_lock(corotask.controls_lock_key()), set_config('idle_session_timeout', $1::bigint::text, false)`
	CitusControlsUnlock = `SELECT set_config('idle_session_timeout', '0', false), pg_advisory_unlock(corotask.controls_lock_key())`
)

// CitusControls reads, under the controls lock, the controls of the types
// $1: task_type, whether it is paused, its max_running (0: none), whether
// it has a key space, its rate limit (NULL: none) and the whole tokens the
// limit holds now, and the database's time (corotask.now()).
const CitusControls = `SELECT c.task_type, c.paused_at IS NOT NULL, coalesce(c.max_running, 0), c.key_space IS NOT NULL,
       c.rate_limit, (SELECT floor(` + rateTokens + `)::int FROM corotask.rate_limits l WHERE l.name = c.rate_limit),
       corotask.now()
FROM corotask.type_controls c WHERE c.task_type = ANY ($1::text[])`

// CitusCountedRunning counts, over every shard, the running polls of each
// of the types $1 that count toward its maximum, as the claim counts them
// (claimTypeRunning): claims that count and have not expired, or expired
// within the last second.
const CitusCountedRunning = `SELECT task_type, count(*)::int FROM corotask.tasks
WHERE task_type = ANY ($1::text[]) AND claim IS NOT NULL AND counted
  AND claim_expires_at >= corotask.now() - interval '1 second'
GROUP BY task_type`

// CitusTakeTokens takes $2 tokens from each rate limit $1 (a negative
// count gives them back), the bucket refilled up to $3, the time
// CitusControls read: the time is a parameter, as Citus refuses
// corotask.now() (a COALESCE) in an UPDATE of a reference table.
var CitusTakeTokens = `UPDATE corotask.rate_limits l SET
    tokens = ` + strings.ReplaceAll(rateTokens, "corotask.now()", "$3::timestamptz") + ` - u.n,
    refilled_at = greatest(l.refilled_at, $3::timestamptz)
FROM unnest($1::text[], $2::float8[]) AS u(name, n)
WHERE l.name = u.name`

// ClaimCounted is Claim for the types with controls on Citus, which the
// executor caps ($3, $4) within their controls: it claims them although
// they have controls (its gained is false), and its claims of the types
// $13 count toward their maximums (tasks.counted).
var ClaimCounted = claimCounted()

func claimCounted() string {
	q := strings.Replace(Claim,
		`SELECT EXISTS (SELECT 1 FROM corotask.type_controls x WHERE x.task_type = ANY ($6::text[])) AS yes`,
		`SELECT false AS yes`, 1)
	return strings.Replace(q, claimUpdate+claimUpdateTail,
		claimUpdate+`
        counted = t.task_type = ANY ($13::text[]),`+claimUpdateTail, 1)
}

// ClaimShardCounted is ClaimCounted on the shard that holds root $1, with
// ClaimCounted's parameters after it.
var ClaimShardCounted = `SELECT * FROM ` + claimShardCountedName + `($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`
