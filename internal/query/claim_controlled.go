package query

// ClaimControls locks, for the claim that follows it in the transaction,
// the controls of the types it polls ($1): their rows in
// corotask.type_controls, then the key spaces and rate limits they name, in
// that order and each sorted (as every change of them locks them), so that
// two executors claiming a limited type count its running polls one after
// the other, each in a snapshot taken after the other's claim committed.
// A type without controls has no row, and locks nothing. ClaimSettings,
// before it, took the controls lock shared. It returns the types of $1 that have
// controls (the executor creates no eager child of those: see eager.go), and
// how many key spaces and rate limits it locked (reading them is what makes
// their locking CTEs run).
//
// Far from a maximum, claims need not take turns. A claimer $2 that asks
// for it (its last claim found room: ClaimNoteRoom) has the rows locked
// shared (FOR SHARE) rather than exclusive, when every controlled type of
// $1 has a maximum and no key space or rate limit (or is paused), so that
// executors claiming the same type run side by side; ClaimControlled then
// takes at most a share (claimShareTake) of each, and only while every
// other claimer's share still fits over the running polls it counts (see
// claimMaxFree): that is what keeps the claims in flight within the
// maximum, whatever the room when the claimer asked. The claimer must be a
// live executor of corotask.executors (its claim loop claims one claim at
// a time); $2 NULL (PollOnce, the priority lane, or a claimer whose last
// claim found no room) locks exclusive. A shared lock and an exclusive one
// exclude each other, and every claim locks all its types one way, in the
// order of their names: an exclusive claim counts every shared claim before
// it. The way it locked is left in the transaction's setting
// corotask.claim_shared ('true' or 'false') for ClaimControlled.
var ClaimControls = ClaimControlsFor(false)

// ClaimControlsFor is ClaimControls, or, lean, its form for types with no
// key space and no rate limit (ClaimControlledFor's lean forms): it locks
// no key space or rate limit (none are named), and returns 0 for them. A
// type that gained one since is found by the lean claim, which then claims
// nothing (see ClaimNoteLimits).
func ClaimControlsFor(lean bool) string {
	if lean {
		return claimControlsLean
	}
	return claimControlsFull
}

// claimControlsMode decides how ClaimControls locks the rows, and locks
// them (exclusive, or shared).
const claimControlsMode = `
WITH mode AS (
    SELECT $2::uuid IS NOT NULL
       AND EXISTS (SELECT 1 FROM corotask.executors e
                   WHERE e.executor_id = $2::uuid AND e.stopped_at IS NULL AND e.expires_at > now())
       AND NOT EXISTS (
           SELECT 1 FROM corotask.type_controls c
           WHERE c.task_type = ANY ($1::text[]) AND c.paused_at IS NULL
             AND (c.max_running IS NULL OR c.key_space IS NOT NULL OR c.rate_limit IS NOT NULL)
       ) AS shared
), exclusive AS (
    SELECT task_type, key_space, rate_limit FROM corotask.type_controls
    WHERE task_type = ANY ($1::text[]) AND NOT (SELECT shared FROM mode)
    ORDER BY task_type
    FOR NO KEY UPDATE
), shared AS (
    SELECT task_type FROM corotask.type_controls
    WHERE task_type = ANY ($1::text[]) AND (SELECT shared FROM mode)
    ORDER BY task_type
    FOR SHARE`

// claimControlsTypes returns ClaimControls' types, then how many key
// spaces and rate limits it locked.
const claimControlsTypes = `
SELECT coalesce((SELECT array_agg(task_type) FROM (SELECT task_type FROM exclusive UNION ALL SELECT task_type FROM shared) t), '{}'),
       `

// claimControlsTail leaves the way ClaimControls locked in the
// transaction's setting.
const claimControlsTail = `,
       set_config('corotask.claim_shared', (SELECT shared FROM mode)::text, true)`

const claimControlsFull = claimControlsMode + `
), spaces AS (
    SELECT key_space FROM corotask.key_limits WHERE key_space IN (SELECT key_space FROM exclusive)
    ORDER BY key_space
    FOR NO KEY UPDATE
), rates AS (
    SELECT name FROM corotask.rate_limits WHERE name IN (SELECT rate_limit FROM exclusive)
    ORDER BY name
    FOR NO KEY UPDATE
)` + claimControlsTypes + `(SELECT count(*) FROM spaces) + (SELECT count(*) FROM rates)` + claimControlsTail

const claimControlsLean = claimControlsMode + `
)` + claimControlsTypes + `0::bigint` + claimControlsTail

// claimTypeRunning counts the running polls of type c toward its maximum:
// the claims that count (tasks.counted) and have not expired, or expired
// within the last second (see ClaimControlled), through
// tasks_running_counted_idx.
const claimTypeRunning = `(SELECT count(*) FROM corotask.tasks r
                                WHERE r.task_type = c.task_type AND r.claim IS NOT NULL AND r.counted
                                  AND r.claim_expires_at >= corotask.now() - interval '1 second')`

// claimClaimers counts the executors that may have a claim in flight: every
// registered one that has not stopped and has not been expired for an hour
// (a claim lasts at most its executor's heartbeat timeout; one that died
// within the hour still counts). An executor marks its row stopped once its
// claim loop has ended (see the executor's registration).
const claimClaimers = `(SELECT count(*) FROM corotask.executors e
                        WHERE e.stopped_at IS NULL AND e.expires_at > now() - interval '1 hour')`

// claimShareTake is the most a claim that holds type c's row shared takes
// of it: an eighth of its maximum, rounded up.
const claimShareTake = `((c.max_running + 7) / 8)`

// ClaimControlled is Claim for an executor some of whose types have flow
// controls (corotask.type_controls: see docs/flow-control.md), with the
// same parameters and rows. ClaimControls, earlier in the transaction, has
// locked their rows, so that this statement's snapshot holds every claim
// committed before; it counts against them: each type takes at most what
// its controls allow (none while paused; its free slots under its
// max_running, counting the running claims that count toward it,
// tasks.counted, and have not expired, or, when ClaimControls held the rows
// shared, a share while the other claimers' shares fit over those; the
// whole tokens of its rate limit),
// a task whose limit key is at its key space's limit waits (the search
// passes over it, and counts that key's running tasks for each such task),
// and a rate limit shared by types is shared by their claims. The claims it
// makes count toward their type's max_running (tasks.counted), and take a
// token each of their type's rate limit; the last row's next wake_at is no
// later than the next whole token of a rate limit that has none.
//
// The last row's last column holds its notes for the executor's next
// claim: ClaimNoteLimits and ClaimNoteRoom, or'ed.
//
// A claim counts as running until a second after its expiry: a renewal
// that began before the expiry (see HeartbeatRenew) may commit after this
// statement's snapshot, and must find its slot its own still. It is the
// largest of ClaimControlledFor's forms.
var ClaimControlled = ClaimControlledFor(true, true, false)

// The notes of ClaimControlled's last row (its last column), bits of a
// smallint.
const (
	// ClaimNoteLimits says that a type polled has a key space or a rate
	// limit: a lean form (see ClaimControlledFor) then claimed nothing, and
	// the claim is to be made again with a full one.
	ClaimNoteLimits = 1
	// ClaimNoteRoom says that every controlled type polled is paused, or
	// has a maximum, no key space and no rate limit, and room over its
	// running polls for a share for every executor that may be claiming
	// (claimClaimers): the next claim of the claim loop may ask
	// ClaimControls to lock the rows shared.
	ClaimNoteRoom = 2
)

// ClaimControlledFor is ClaimControlled, or a smaller form of it, as
// ClaimFor is Claim: without stale ($12 false), no search of expired
// claims, no record of takeovers, and no stale floor (NULL); without
// floors ($10 NULL), no read of the next floors (NULL, as they are then).
// Lean, it is the form for types whose controls are pauses and maximums
// only (as the executor's last claim found them; ClaimControlsFor(true)
// goes with it): it reads no key space and no rate limit, and, when a type
// polled has one, it claims nothing and notes it (ClaimNoteLimits).
// PostgreSQL sets up each part of a statement at every execution: the
// lean form of a claim of 8 tasks costs about a fifth less than the full
// one, close to Claim's (see docs/benchmarks.md).
func ClaimControlledFor(stale, floors, lean bool) string {
	return claimControlledForms[boolIndex(lean)][boolIndex(stale)][boolIndex(floors)]
}

// claimControlledForms holds ClaimControlledFor's statements, by
// [lean][stale][floors].
var claimControlledForms = func() (forms [2][2][2]string) {
	for lean := range 2 {
		for stale := range 2 {
			for floors, nextFloors := range []string{"NULL::timestamptz[]", claimNextFloors} {
				forms[lean][stale][floors] = claimControlledPlain(lean == 1, claimStaleFor(stale == 1, claimStaleControlled), nextFloors)
			}
		}
	}
	return forms
}()

// claimControlledPlain composes ClaimControlled and its smaller forms, as
// claimPlain does Claim's; lean, without key spaces and rate limits. Its
// quota reads no open_quota: the share among types is picked's, within the
// controls.
func claimControlledPlain(lean bool, stale claimStaleParts, nextFloors string) string {
	ctl, ready, picked, took, nextWake := claimControls, claimReadyKeyed, claimPickedControlled,
		`
), `+claimTook, `least(`+claimNextWake+`, (`+claimNextToken+`))`
	if lean {
		ctl, ready, picked, took, nextWake = claimControlsLeanRead, claimReadyPlain, claimPickedLean, "", claimNextWake
	}
	return `
WITH ` + ctl + `
), ` + claimFloors + `
), ` + claimQuotaControlled + `
), ` + ready + `
), ` + stale.search + `
), ` + claimCandidates + `
), ` + picked + `
), ` + claimUpdateControlled + took + `
)` + stale.rows + nextWake + `, NULL, ` + nextFloors + `, ` + stale.floor + `, NULL, ` + claimNotes
}

// claimNotes is the last row's last column: the notes (ClaimNoteLimits,
// ClaimNoteRoom), from the controls read (ctl). With no type with
// controls there is room, and no limit. The room is that of the claim's
// snapshot: what the claim takes itself is not counted (counting it made
// claims far from a maximum lock exclusive more often, and cost
// throughput: see docs/benchmarks.md); a claim that asks to share on a
// note the claims since have made old takes what fits, or, taking
// nothing, is made again exclusive (see the executor's claimWith).
const claimNotes = `(
    SELECT (CASE WHEN bool_or(l.limits) THEN 1 ELSE 0 END
            | CASE WHEN coalesce(bool_and(l.paused OR coalesce(l.spare >= 0, false)), true) THEN 2 ELSE 0 END)::smallint
    FROM ctl l)`

// claimPickedLean is the lean forms' choice among the candidates:
// claimPickedControlled's, without keys and rate limits, and nothing at
// all when a type polled has one (ClaimNoteLimits).
const claimPickedLean = `picked AS (
    -- Stale claims first, then ready tasks by priority and age, each type
    -- within what its controls allow (cap) and a capped type within its
    -- free slots over both. Nothing when a type polled has a key space or
    -- a rate limit: the executor claims with the full form then.
    SELECT p.task_id FROM (
        SELECT t.task_id, t.k, t.priority, t.at, least(s.n, q.cap) AS cap,
               row_number() OVER (PARTITION BY t.task_type ORDER BY t.k, t.priority DESC, t.at) AS rank
        FROM candidates t
        LEFT JOIN unnest($3::text[], $4::int[]) AS s(typ, n) ON s.typ = t.task_type
        LEFT JOIN ctl q ON q.typ = t.task_type
        WHERE NOT EXISTS (SELECT 1 FROM ctl x WHERE x.limits)
    ) p
    WHERE p.cap IS NULL OR p.rank <= p.cap
    ORDER BY p.k, p.priority DESC, p.at
    LIMIT $2`

// claimStaleControlled is ClaimControlled's search of expired claims: a
// paused type waits.
const claimStaleControlled = claimStale + `
      AND task_type <> ALL (ARRAY(SELECT typ FROM ctl WHERE cap = 0))` + claimStaleTail

// claimUpdateControlled is ClaimControlled's claim of the picked tasks.
const claimUpdateControlled = claimUpdate + `
        -- The claim counts toward its type's max_running, if it has one
        -- (NULL otherwise: see migration 17).
        counted = CASE WHEN t.task_type = ANY (ARRAY(SELECT typ FROM ctl WHERE counts)) THEN true END,` + claimUpdateTail + `
    WHERE t.task_id = ANY (ARRAY(SELECT task_id FROM picked))
    ` + claimReturning

// claimControls is ClaimControlled's read of the controls of its types.
const claimControls = `ctl AS (
    -- The controls of the types polled (see ClaimControls, which locked
    -- their rows earlier in the transaction, so that this statement's
    -- snapshot holds every claim committed before): how many more polls
    -- each may start (cap: 0 when paused; its free slots under max_running;
    -- the whole tokens of its rate limit), its key space and the space's
    -- limit per key, its rate limit and the tokens it holds now. A type
    -- without a row has no controls, and a claim without any reads nothing
    -- more than this index probe.
    SELECT c.task_type AS typ, c.paused_at IS NOT NULL AS paused, c.max_running IS NOT NULL AS counts,
           CASE WHEN c.paused_at IS NOT NULL THEN 0 WHEN c.max_running IS NULL AND b.name IS NULL THEN NULL ELSE greatest(least(
               ` + claimMaxFree + `,
               floor(b.tokens)), 0)::int END AS cap,
           ` + claimControlsNoted + `,
           k.key_space, k.max_running AS key_max, b.name AS rate_name, b.tokens, b.token_secs,
           CASE WHEN k.key_space IS NOT NULL
                THEN ARRAY(SELECT x.task_type FROM corotask.type_controls x WHERE x.key_space = k.key_space) END AS space_types
    FROM corotask.type_controls c` + claimRunningRead + `
    LEFT JOIN corotask.key_limits k ON k.key_space = c.key_space
    LEFT JOIN LATERAL (
        SELECT rl.name, extract(epoch FROM rl.per)::float8 / rl.rate AS token_secs,
               corotask.rate_limit_tokens(rl, corotask.now()) AS tokens
        FROM corotask.rate_limits rl WHERE rl.name = c.rate_limit
    ) b ON true
    WHERE c.task_type = ANY ($6::text[])`

// claimControlsLeanRead is the lean forms' read of the controls: pauses
// and maximums (no key space: the columns claimQuotaControlled reads of
// one are NULL). A type with a key space or a rate limit takes nothing
// (and picked, nothing at all: see ClaimNoteLimits).
const claimControlsLeanRead = `ctl AS (
    -- The controls of the types polled, as claimControls reads them, but
    -- for key spaces and rate limits.
    SELECT c.task_type AS typ, c.paused_at IS NOT NULL AS paused, c.max_running IS NOT NULL AS counts,
           CASE WHEN c.paused_at IS NOT NULL OR c.key_space IS NOT NULL OR c.rate_limit IS NOT NULL THEN 0
                WHEN c.max_running IS NULL THEN NULL
                ELSE greatest(` + claimMaxFree + `, 0)::int END AS cap,
           ` + claimControlsNoted + `,
           NULL::text AS key_space, NULL::int AS key_max, NULL::text[] AS space_types
    FROM corotask.type_controls c` + claimRunningRead + `
    WHERE c.task_type = ANY ($6::text[])`

// claimRunningRead reads, for a type c with a maximum that is not paused,
// its running polls and the executors that may be claiming it (n).
const claimRunningRead = `
    LEFT JOIN LATERAL (
        SELECT ` + claimTypeRunning + ` AS running,
               ` + claimClaimers + ` AS claimers
        WHERE c.max_running IS NOT NULL AND c.paused_at IS NULL
        OFFSET 0
    ) n ON true`

// claimMaxFree is how many more polls type c's maximum lets the claim
// start: its free slots, or, held shared (see ClaimControls), a share at
// most, and only while every other claimer's share fits.
const claimMaxFree = `CASE WHEN current_setting('corotask.claim_shared', true) = 'true'
                    THEN least(` + claimShareTake + `,
                               c.max_running - n.running - (n.claimers - 1) * ` + claimShareTake + `)
                    ELSE c.max_running - n.running END`

// claimControlsNoted is what claimNotes reads of each type: whether it
// has a key space or a rate limit (limits), and, for a type that may be
// held shared (a maximum, no key space, no rate limit), how many slots
// its maximum leaves over its running polls and a share for every
// claimer (spare; NULL for any other type: see ClaimNoteRoom).
const claimControlsNoted = `c.key_space IS NOT NULL OR c.rate_limit IS NOT NULL AS limits,
           CASE WHEN c.key_space IS NULL AND c.rate_limit IS NULL
                THEN c.max_running - n.running - n.claimers * ` + claimShareTake + ` END AS spare`

// claimQuotaControlled is ClaimControlled's quota of each type, within its
// controls.
const claimQuotaControlled = `quota AS (
    -- How many ready tasks to take of each type, within what its controls
    -- allow: of each uncapped type, up to $2 (picked keeps the $2 first of
    -- all: shares counted from the ready tasks, as open_quota does, would
    -- give a share to a type its controls hold back, and none to the
    -- others); of each capped type, its free slots.
    SELECT o.typ, least($2::int, l.cap) AS n, l.key_space, l.key_max, l.space_types FROM unnest($1::text[]) AS o(typ)
    LEFT JOIN ctl l ON l.typ = o.typ
    UNION ALL
    SELECT q.typ, least(q.n, l.cap), l.key_space, l.key_max, l.space_types FROM unnest($3::text[], $4::int[]) AS q(typ, n)
    LEFT JOIN ctl l ON l.typ = q.typ`

// claimReadyKeyed is ClaimControlled's: a task whose key is at its
// space's limit waits (the subquery runs only for tasks with a key, of a
// type with a key space).
const claimReadyKeyed = claimReadyFirst + claimKeyFilter + claimReadyThen + claimKeyFilter + claimReadyEnd

// claimKeyFilter passes over a task whose limit key is at its space's
// limit.
const claimKeyFilter = `
          AND (q.key_space IS NULL OR t.limit_key IS NULL OR ` + claimKeyRunning + ` < q.key_max)`

// claimKeyRunning counts the running tasks (claims not expired, or expired
// within the last second: see ClaimControlled) with the limit key of task t
// among the types q.space_types of its type's key space: what the space's
// limit per key counts (index tasks_running_limit_key_idx). The claim
// counts it only for the tasks with a limit key of a type with a key
// space.
const claimKeyRunning = `(SELECT count(*) FROM corotask.tasks r
              WHERE r.limit_key = t.limit_key AND r.claim IS NOT NULL AND r.limit_key IS NOT NULL
                AND r.claim_expires_at >= corotask.now() - interval '1 second' AND r.task_type = ANY (q.space_types))`

// claimPickedControlled is ClaimControlled's choice among the candidates,
// within the controls.
const claimPickedControlled = `picked AS (
    -- Stale claims first, then ready tasks by priority and age, each type
    -- within what its controls allow (cap) and a capped type within its
    -- free slots over both; each key within its room under its space's
    -- limit, and each rate limit within its whole tokens.
    SELECT p.task_id FROM (
        SELECT t.task_id, t.k, t.priority, t.at, least(s.n, q.cap) AS cap,
               row_number() OVER (PARTITION BY t.task_type ORDER BY t.k, t.priority DESC, t.at) AS rank,
               CASE WHEN q.key_space IS NOT NULL AND t.limit_key IS NOT NULL
                    THEN q.key_max - ` + claimKeyRunning + ` END AS key_room,
               row_number() OVER (PARTITION BY q.key_space, t.limit_key ORDER BY t.k, t.priority DESC, t.at) AS key_rank,
               q.rate_name, q.tokens,
               row_number() OVER (PARTITION BY q.rate_name ORDER BY t.k, t.priority DESC, t.at) AS rate_rank
        FROM candidates t
        LEFT JOIN unnest($3::text[], $4::int[]) AS s(typ, n) ON s.typ = t.task_type
        LEFT JOIN ctl q ON q.typ = t.task_type
    ) p
    WHERE (p.cap IS NULL OR p.rank <= p.cap) AND (p.key_room IS NULL OR p.key_rank <= p.key_room)
      AND (p.rate_name IS NULL OR p.rate_rank <= p.tokens)
    ORDER BY p.k, p.priority DESC, p.at
    LIMIT $2`

// claimTook takes the tokens of ClaimControlled's claims from
// their rate limits.
const claimTook = `took AS (
    -- Each poll started takes a token of its type's rate limit.
    UPDATE corotask.rate_limits rl SET
        tokens = corotask.rate_limit_tokens(rl, corotask.now()) - u.n,
        refilled_at = greatest(rl.refilled_at, corotask.now())
    FROM (SELECT l.rate_name, count(*) AS n FROM claimed c JOIN ctl l ON l.typ = c.task_type
          WHERE l.rate_name IS NOT NULL GROUP BY l.rate_name) u
    WHERE rl.name = u.rate_name
    RETURNING rl.name, rl.tokens`

// claimNextToken is when a rate limit's bucket has its next whole
// token, once ClaimControlled took those it had.
const claimNextToken = `
    -- When the bucket of a rate limit left below a whole token (by this
    -- claim's takes, or before) has its next one: a claim then finds the
    -- tasks that wait on it. A full bucket asks for nothing.
    SELECT corotask.now() + min(make_interval(secs => (1 - b.left) * l.token_secs))
    FROM ctl l
    LEFT JOIN took k ON k.name = l.rate_name
    CROSS JOIN LATERAL (SELECT coalesce(k.tokens, l.tokens) AS left) b
    WHERE l.rate_name IS NOT NULL AND b.left < 1`
