package query

import "strings"

// Flow controls on Citus. A type's maximum of running polls and its rate
// limit count over every shard, and a claim on one shard cannot count
// them. A claim on Citus therefore holds, on the coordinator, the controls
// lock (corotask.controls_lock_key) shared as a session lock for its whole
// length (CitusClaimBegin), as a claim on one server holds it in its
// transaction: a change of the controls (corotask.control_begin, which takes
// it exclusive) waits for the claims in flight, and every later claim sees
// it; commits, which take it shared, do not wait. It claims the types
// without controls first; then, for the types with controls, it takes the
// controlled claims' lock (CitusControlledLock) exclusive, so that such
// claims take turns across the fleet, reads their controls and the running
// polls counted toward their maximums over every shard
// (CitusCountedRunning), reserves a rate limit's tokens (CitusReserveTokens),
// claims shard by shard within what is left (ClaimShardCounted), and gives
// back the tokens it did not use (CitusReturnTokens). CitusClaimEnd
// releases both locks. Key spaces (a limit per key over the tasks of
// several types) are not claimed on Citus.

// CitusControlledTypes reads which of the types $1 have flow controls, and
// which of those have a key space.
const CitusControlledTypes = `SELECT coalesce(array_agg(task_type), '{}'),
       coalesce(array_agg(task_type) FILTER (WHERE key_space IS NOT NULL), '{}')
FROM corotask.type_controls WHERE task_type = ANY ($1::text[])`

// CitusClaimBegin takes the controls lock shared as a session lock (see
// above); the session ends if it stays idle for $1 milliseconds while it
// holds the locks (idle_session_timeout): an executor frozen between two of
// its statements would otherwise hold every change of the controls, and
// every controlled claim, until it woke. CitusControlledLock takes the
// controlled claims' lock. CitusClaimEnd releases them, and the timeout.
const (
	CitusClaimBegin     = `SELECT set_config('idle_session_timeout', $1::bigint::text, false), pg_advisory_lock_shared(corotask.controls_lock_key())`
	CitusControlledLock = `SELECT pg_advisory_lock(corotask.controls_lock_key() + 1)`
	CitusClaimEnd       = `RESET idle_session_timeout; SELECT pg_advisory_unlock_all()`
)

// CitusControls reads, under the controls lock, the controls of the types
// $1: task_type, whether it is paused, its max_running (0: none), whether
// it has a key space, its rate limit (NULL: none) and the whole tokens the
// limit holds now (0 without one), and the database's time (corotask.now()).
const CitusControls = `SELECT c.task_type, c.paused_at IS NOT NULL, coalesce(c.max_running, 0), c.key_space IS NOT NULL,
       c.rate_limit, coalesce((SELECT floor(` + rateTokens + `)::int FROM corotask.rate_limits l WHERE l.name = c.rate_limit), 0),
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

// CitusReserveTokens takes up to $2 whole tokens from the rate limit $1,
// its bucket refilled up to $3 (the time CitusControls read), and returns
// how many it took; CitusReturnTokens gives $2 back (see
// corotask.take_tokens).
const (
	CitusReserveTokens = `SELECT corotask.take_tokens($1, $2, $3)`
	CitusReturnTokens  = `SELECT corotask.give_back_tokens($1, $2, $3)`
)

// ClaimCounted is Claim for the types with controls on Citus, which the
// executor caps ($3, $4) within their controls: it claims them although
// they have controls (its gained is false), and its claims of the types
// $13 count toward their maximums (tasks.counted).
var ClaimCounted = claimCounted()

func claimCounted() string {
	gained := `SELECT EXISTS (SELECT 1 FROM corotask.type_controls x WHERE x.task_type = ANY ($6::text[])) AS yes`
	update := claimUpdate + claimUpdateTail
	if strings.Count(Claim, gained) != 1 || strings.Count(Claim, update) != 1 {
		panic("query: ClaimCounted: Claim no longer holds the gained test and the update it rewrites")
	}
	q := strings.Replace(Claim, gained, `SELECT false AS yes`, 1)
	return strings.Replace(q, update, claimUpdate+`
        counted = t.task_type = ANY ($13::text[]),`+claimUpdateTail, 1)
}

// ClaimShardCounted is ClaimCounted on the shard that holds root $1, with
// ClaimCounted's parameters after it.
var ClaimShardCounted = `SELECT * FROM ` + claimShardCountedName + `($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`
