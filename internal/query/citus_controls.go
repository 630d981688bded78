package query

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
// releases both locks. A key space (a limit per key over the tasks of
// several types) is counted the same way: the running tasks of its types
// per key over every shard (CitusKeysRunning), which the claim on a shard
// takes as a parameter in place of its own count, and to which the
// executor adds the keys each shard's claim took (CitusClaimedKeys) before
// it claims on the next.

// CitusControlledTypes reads which of the types $1 have flow controls.
const CitusControlledTypes = `SELECT coalesce(array_agg(task_type), '{}') FROM corotask.type_controls WHERE task_type = ANY ($1::text[])`

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
// $1: task_type, whether it is paused, its max_running (0: none), its key
// space (NULL: none) and the space's limit per key (0 without one), its
// rate limit (NULL: none), the tokens the limit holds now and the seconds
// it takes to refill one (0 without one), and the database's time
// (corotask.now()).
const CitusControls = `SELECT c.task_type, c.paused_at IS NOT NULL, coalesce(c.max_running, 0),
       k.key_space, coalesce(k.max_running, 0),
       c.rate_limit, coalesce((SELECT ` + rateTokens + ` FROM corotask.rate_limits l WHERE l.name = c.rate_limit), 0),
       coalesce((SELECT extract(epoch FROM l.per)::float8 / l.rate FROM corotask.rate_limits l WHERE l.name = c.rate_limit), 0),
       corotask.now()
FROM corotask.type_controls c
-- A key space without its limit (a row edited by hand) limits nothing, as
-- on one server.
LEFT JOIN corotask.key_limits k ON k.key_space = c.key_space
WHERE c.task_type = ANY ($1::text[])`

// CitusKeysRunning counts, over every shard, the running tasks of the
// types of each key space of $1 per limit key, as the claim counts them
// (claimKeyRunning: claims that have not expired, or expired within the
// last second, of every type of the space, those the claim does not poll
// included): key_space, limit_key, count.
const CitusKeysRunning = `SELECT c.key_space, r.limit_key, count(*)::int
FROM corotask.tasks r JOIN corotask.type_controls c ON c.task_type = r.task_type
WHERE c.key_space = ANY ($1::text[]) AND r.claim IS NOT NULL AND r.limit_key IS NOT NULL
  AND r.claim_expires_at >= corotask.now() - interval '1 second'
GROUP BY c.key_space, r.limit_key`

// CitusClaimedKeys reads the types and limit keys of the tasks $2 of the
// trees $1 (all on one shard: those one claim_shard_counted call took) that
// have a limit key.
const CitusClaimedKeys = `SELECT task_type, limit_key FROM corotask.tasks
WHERE root_id = ANY ($1::uuid[]) AND task_id = ANY ($2::uuid[]) AND limit_key IS NOT NULL`

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
// they have controls (Claim would claim nothing), its claims of the types
// $13 count toward their maximums (tasks.counted), and a task of a type of
// $14 (in the key space $15, whose limit per key is $16) with a limit key
// waits while that key's running tasks in its space, $19 for the space
// $17 and key $18 (counted by the executor over every shard), are at the
// limit: the claim's own count (claimKeyRunning) would see its shard's
// alone. Its rows are Claim's; the last one's last column is NULL.
const ClaimCounted = `
WITH ` + claimSearch + `
), ` + claimQuotaCounted + `
), ` + claimReadyFirst + claimKeyFilterCounted + claimReadyThen + claimKeyFilterCounted + claimReadyEnd + `
), ` + claimStale + claimStaleTail + `
), ` + claimCandidates + `
), ` + claimPickedCounted + `
), ` + claimUpdate + `
        counted = CASE WHEN t.task_type = ANY ($13::text[]) THEN true END,` + claimUpdateTail + `
    WHERE t.task_id = ANY (ARRAY(SELECT task_id FROM picked))
    ` + claimReturning + `
), ` + claimTail + claimNextWake + `, NULL, ` + claimFloorsTail + `, NULL`

// claimQuotaCounted is ClaimCounted's quota of each type (as Claim's), with
// its key space and limit per key.
const claimQuotaCounted = `quota AS (
    SELECT o.typ, o.n, k.space AS key_space, k.max AS key_max FROM open_quota o
    LEFT JOIN unnest($14::text[], $15::text[], $16::int[]) AS k(typ, space, max) ON k.typ = o.typ
    UNION ALL
    SELECT q.typ, q.n, k.space, k.max FROM unnest($3::text[], $4::int[]) AS q(typ, n)
    LEFT JOIN unnest($14::text[], $15::text[], $16::int[]) AS k(typ, space, max) ON k.typ = q.typ`

// claimKeyFilterCounted passes over a task whose limit key is at its
// space's limit, counted over every shard ($17 to $19).
const claimKeyFilterCounted = `
          AND (q.key_space IS NULL OR t.limit_key IS NULL OR ` + claimKeyRunningCounted + ` < q.key_max)`

// claimKeyRunningCounted is the running tasks of task t's limit key in its
// type's key space q.key_space, as the executor counted them.
const claimKeyRunningCounted = `coalesce((SELECT r.n FROM unnest($17::text[], $18::text[], $19::int[]) AS r(space, key, n)
                           WHERE r.space = q.key_space AND r.key = t.limit_key), 0)`

// claimPickedCounted is ClaimCounted's choice among the candidates: as
// Claim's, and each key within its room under its space's limit.
const claimPickedCounted = `picked AS (
    SELECT p.task_id FROM (
        SELECT t.task_id, t.k, t.priority, t.at, s.n AS cap,
               row_number() OVER (PARTITION BY t.task_type ORDER BY t.k, t.priority DESC, t.at) AS rank,
               CASE WHEN q.key_space IS NOT NULL AND t.limit_key IS NOT NULL
                    THEN q.key_max - ` + claimKeyRunningCounted + ` END AS key_room,
               row_number() OVER (PARTITION BY q.key_space, t.limit_key ORDER BY t.k, t.priority DESC, t.at) AS key_rank
        FROM candidates t
        LEFT JOIN unnest($3::text[], $4::int[]) AS s(typ, n) ON s.typ = t.task_type
        LEFT JOIN unnest($14::text[], $15::text[], $16::int[]) AS q(typ, key_space, key_max) ON q.typ = t.task_type
    ) p
    WHERE (p.cap IS NULL OR p.rank <= p.cap) AND (p.key_room IS NULL OR p.key_rank <= p.key_room)
    ORDER BY p.k, p.priority DESC, p.at
    LIMIT $2`

// ClaimShardCounted is ClaimCounted on the shard that holds root $1, with
// ClaimCounted's parameters after it.
var ClaimShardCounted = `SELECT * FROM ` + claimShardCountedName + `($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)`
