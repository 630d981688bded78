package query

// ClaimTakeoverError is the last_error of a task whose claim was taken
// over, and the error of its 'taken_over' history row: the attempt counts as
// a failed poll.
const ClaimTakeoverError = "claim expired: the executor polling this task stopped renewing its claim (crashed, killed or stalled)"

// ClaimSettings makes the claim run on its cached generic plan. Left to
// itself (plan_cache_mode = auto), PostgreSQL re-plans the claim at every
// execution: its CTEs make planning cost as much as a small claim's
// execution, while a generic plan that joined picked to the table would scan
// the whole table. The claim therefore updates by "task_id = ANY (ARRAY(...))",
// which is an index probe in every plan, and forces the generic plan, built
// once per connection. That plan is built once, at the first claim, when
// the table may hold a handful of rows (a workflow that starts from one
// task): a sequential scan is then the cheapest plan, and it would stay the
// connection's plan while the table grows. enable_seqscan is off for the
// claim, so the plan is the indexes' whatever the table's size when it is
// made. A generic plan's cost is estimated without the parameters (how
// many types, how many tasks); with a large ready backlog it passes the
// server's jit_above_cost thresholds, and JIT-compiling the claim took
// 0.6 - 1.2 s at every execution (JIT code is not kept with a cached plan),
// for a claim that runs in a millisecond: jit is off for the claim.
// set_config(..., true) keeps the settings to the claim's own transaction,
// so the caller's pool is left as it was.
//
// It also takes the controls lock (corotask.controls_lock_key) shared, in this statement before the claim's
// others, so that ClaimControls, and the claim, take their
// snapshots after it: a change of the controls that committed while the
// claim waited for it is seen (and its rows locked) by all of them.
const ClaimSettings = "SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true), set_config('jit', 'off', true), pg_advisory_xact_lock_shared(corotask.controls_lock_key())::text"

// ClaimReadyEntriesWalked is how many entries of the ready index the scans
// of this transaction have read so far, the dead ones included (those a scan
// had already marked dead are skipped, and not counted). Read before and
// after a claim, it says how many the claim walked (see the executor's
// readyFloors).
const ClaimReadyEntriesWalked = "SELECT pg_stat_get_xact_tuples_returned('corotask.tasks_ready_idx'::regclass)"

// ClaimParams are the types of the parameters of Claim, in order, for
// PREPARE.
const ClaimParams = "text[], int, text[], int[], float8, text[], uuid, uuid[], int[], timestamptz[], timestamptz, boolean"

// Claim is the claim statement of an executor none of whose types has
// flow controls (ClaimControlled is the other's). It claims, in one
// statement, up to $2 ready tasks: of the uncapped types $1, and of each
// capped type $3 up to its free slots $4, the highest priority first, then
// the oldest wake_at; and, when $12 is true, tasks of any type $6 whose
// claim expired (their executor died or stalled), but for the tasks $8
// this executor is polling. When a type of $6 has flow controls it claims
// nothing (a one-time filter), and its last row says so (its last column is
// 1): the executor then claims with ClaimControls and ClaimControlled. The
// claim loop asks for the stale search once per PollInterval; without it,
// the stale CTE is a one-time filter that reads nothing.
//
// Parameters, positional (the statement is prepared once per connection and
// runs on its generic plan, see ClaimSettings):
//
//	$1  text[]         the uncapped types
//	$2  int            how many tasks to claim at most
//	$3  text[]         the capped types with free slots ...
//	$4  int[]          ... and how many of each
//	$5  float8         the seconds a claim lasts unless renewed
//	$6  text[]         every type with a free slot ($1 and $3)
//	$7  uuid           the claiming executor
//	$8  uuid[]         the tasks it polls (not taken back by the stale search)
//	$9  int[]          per type of $6, the window of its inbox a poll is shown
//	$10 timestamptz[]  per type of $6, its floor, or NULL (see below)
//	$11 timestamptz    the floor of the stale search, or NULL
//	$12 boolean        whether to search for stale claims
//
// A claimed task gets a fresh claim token that expires in $5 seconds unless
// renewed, and any inbox_next a dead poll left joins its inbox; the claim
// returns the window of its inbox the poll is shown (at most $9's entry for
// its type: see corotask.inbox_window), and whether more messages wait (its
// inbox holds more than the window shows). The claim raises the task's
// attempt number and records the claiming executor ($7) and the time; it
// returns the task's trace context, for the poll's span to link to. The last
// row (task_id NULL) carries the earliest future wake_at of those types, so
// the executor knows when to look again.
//
// Stale claims come first, then ready tasks, each capped type within its
// free slots over both. A task taken over from an expired claim has that
// attempt counted as a failure, and a 'taken_over' row in its history
// (written whatever the type's History option: takeovers are rare, and
// exactly what an operator looks for).
//
// $10, when not NULL, holds a floor per type of $6: the ready tasks of
// priority 0 of the type are looked for from its floor on, and the last row
// carries each type's next floor, in the order of $6; $11, when not NULL,
// is the floor of the search for stale claims, and the last row carries the
// next one (see the executor's readyFloors). A NULL $10 or $11 reads from
// the oldest entry, and returns no floor. A floor is at the latest one
// second (the floor margin) before the statement's now(): a task that a
// transaction begun up to that long before the claim makes ready (wake_at =
// its now()), and commits after the claim's snapshot, is still above the
// floor.
//
// A task is not running exactly when its claim is NULL; the partial indexes
// tasks_ready_idx, tasks_ready_priority_idx (priority above 0) and
// tasks_running_idx serve the searches. The ready indexes are keyed by
// task_type first, and every search of them is made per type (a LATERAL
// join over the types), so a claim never reads the ready tasks of a type it
// does not poll. With several uncapped types, a first search without locks
// finds how many of the $2 first ready tasks each type has (open_quota), so
// that the claim locks no more than it takes. The tasks of priority 0 are
// searched as they were before priorities (tasks_ready_idx, from the
// floor), after those above 0, whose index is empty while no task has a
// priority (a probe per type).
//
// Claim order (priority, then wake_at) holds for the tasks this statement
// claims only: the eager children a poll spawns (see the executor's
// eager.go) are created claimed by its executor in the commit of their
// parent, and polled at once, ahead of older ready tasks.
//
// The rows: task_id, task_type, parent_id, root_id, inner_state, the window's
// envelopes and seqs, whether more messages wait, the claim token,
// failures, attempts, whether the task was taken over from an expired
// claim, the database's time (corotask.now()), trace, NULL, NULL, the
// task's key (NULL: none), the reasons it was due (tasks.woke's bits, which
// the claim moves to the column's high byte for the poll's commit); then
// the last row: NULLs, the next wake_at, NULL, the types' next floors, the
// next stale floor: the oldest expiry of a claim that expired, of any type
// (locked or not), but no later than the floor margin before
// corotask.now(): a claim's expiry is set to corotask.now() plus a
// HeartbeatTimeout, so a claim taken or renewed after this one is above
// it; and NULL, NULL.
//
// The statement is made of the claim* fragments below, which
// ClaimControlled shares; it is the largest of ClaimFor's forms.
var Claim = ClaimFor(false, true, true)

// ClaimFor is the statement of a claim of an executor none of whose types
// has flow controls, with Claim's parameters and rows: Claim itself, or a
// smaller form of it for a claim that uses less. With oneOpen ($1 holds one
// type), open_quota gives that type all of $2 (the search that shares $2
// among several types is left out). Without stale ($12 false), there is no
// search of expired claims and no record of takeovers, and the last row's
// stale floor is NULL, so that the executor keeps the one its last search
// returned (Claim, with $12 false, returns the floor margin before its
// now()). Without floors ($10 NULL), the last row's next floors are NULL
// without a read, as Claim's are then. PostgreSQL sets up every part of a
// statement at each execution, whether the part reads anything or not: the
// smallest form costs about a quarter less than Claim for a claim of one
// task, a tenth less for one of 50 (see docs/benchmarks.md).
func ClaimFor(oneOpen, stale, floors bool) string {
	return claimForms[boolIndex(oneOpen)][boolIndex(stale)][boolIndex(floors)]
}

// claimForms holds ClaimFor's statements, by [oneOpen][stale][floors].
var claimForms = func() (forms [2][2][2]string) {
	for one, openQuota := range []string{claimOpenQuota, claimOpenQuotaOne} {
		for stale := range 2 {
			for floors, nextFloors := range []string{"NULL::timestamptz[]", claimNextFloors} {
				forms[one][stale][floors] = claimPlain(openQuota, claimStaleFor(stale == 1, claimStale+claimStaleTail), nextFloors)
			}
		}
	}
	return forms
}()

// claimStaleParts are the parts of a claim statement that the search of
// expired claims decides: the search (stale), what follows the claim's
// UPDATE up to the last row's next wake_at (rows: with the search, the
// record of takeovers first), and the last row's stale floor.
type claimStaleParts struct{ search, rows, floor string }

// claimStaleFor returns the parts of a claim with the search of expired
// claims search, or, without it, of one that has none (claimStaleNone, and
// a NULL floor: see ClaimFor).
func claimStaleFor(stale bool, search string) claimStaleParts {
	if stale {
		return claimStaleParts{search, ", " + claimTakenOver + claimRows, claimNextStaleFloor}
	}
	return claimStaleParts{claimStaleNone, claimRows, "NULL::timestamptz"}
}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

// claimPlain composes Claim and its smaller forms: openQuota is the
// share of each uncapped type, stale the parts of the search of expired
// claims, nextFloors the last row's next floors.
func claimPlain(openQuota string, stale claimStaleParts, nextFloors string) string {
	return `
WITH ` + claimFloors + `
), ` + openQuota + `
), ` + claimQuotaPlain + `
), ` + claimReadyPlain + `
), ` + stale.search + `
), ` + claimCandidates + `
), ` + claimPickedPlain + `
), ` + claimUpdate + claimUpdateTail + `
    WHERE t.task_id = ANY (ARRAY(SELECT task_id FROM picked))
    ` + claimReturning + `
)` + stale.rows + claimNextWake + `, NULL, ` + nextFloors + `, ` + stale.floor + `, NULL,
    (SELECT 1::smallint FROM gained WHERE yes)`
}

// claimOpenQuotaOne is claimOpenQuota for one uncapped type: all of $2.
const claimOpenQuotaOne = `open_quota AS (
    SELECT ($1::text[])[1] AS typ, $2::int AS n`

// claimStaleNone is claimStale for a claim that does not search expired
// claims ($12 false): no rows, of the same columns. It names the search's
// parameters, which the statement uses nowhere else, for their types.
const claimStaleNone = `stale AS (
    SELECT NULL::uuid AS task_id, NULL::uuid AS root_id, NULL::text AS task_type, NULL::integer AS attempts,
           NULL::uuid AS claimed_by, NULL::timestamptz AS claimed_at, NULL::smallint AS priority,
           NULL::timestamptz AS claim_expires_at, NULL::text AS limit_key
    WHERE false AND $8::uuid[] IS NULL AND $11::timestamptz IS NULL AND $12::boolean`

// claimSearch begins ClaimCounted (see citus_controls.go): the floors of
// the searches, and the share of each uncapped type (open_quota).
const claimSearch = claimFloors + `
), ` + claimOpenQuota

// claimFloors is the floor of each type's search ($10).
const claimFloors = `floors AS (
    SELECT f.typ, coalesce(f.at, '-infinity') AS at FROM unnest($6::text[], $10::timestamptz[]) AS f(typ, at)`

// claimOpenQuota is the share of each uncapped type: all of $2 for one
// type, and for several their share of the $2 first ready tasks of them
// all, read without locks.
const claimOpenQuota = `open_quota AS (
    SELECT ($1::text[])[1] AS typ, $2::int AS n WHERE cardinality($1::text[]) = 1
    UNION ALL
    SELECT c.typ, count(*)::int FROM (
        SELECT x.typ FROM (
            SELECT q.typ, 0 AS priority, r.wake_at FROM unnest($1::text[]) AS q(typ)
            JOIN floors f ON f.typ = q.typ
            CROSS JOIN LATERAL (
                SELECT wake_at FROM corotask.tasks
                WHERE claim IS NULL AND done_at IS NULL AND wake_at IS NOT NULL AND priority = 0
                  AND wake_at >= f.at AND wake_at <= corotask.now() AND task_type = q.typ
                ORDER BY wake_at
                LIMIT $2
            ) r
            WHERE cardinality($1::text[]) > 1
            UNION ALL
            SELECT q.typ, r.priority, r.wake_at FROM unnest($1::text[]) AS q(typ)
            CROSS JOIN LATERAL (
                SELECT priority, wake_at FROM corotask.tasks
                WHERE claim IS NULL AND done_at IS NULL AND wake_at IS NOT NULL AND priority > 0
                  AND wake_at <= corotask.now() AND task_type = q.typ
                ORDER BY priority DESC, wake_at
                LIMIT $2
            ) r
            WHERE cardinality($1::text[]) > 1
        ) x
        ORDER BY x.priority DESC, x.wake_at
        LIMIT $2
    ) c GROUP BY c.typ`

// claimQuotaPlain is Claim's quota of each type.
const claimQuotaPlain = `quota AS (
    -- How many ready tasks to take of each type: of the uncapped types,
    -- their share of the $2 first (by priority, then age); of each capped
    -- type, its free slots.
    SELECT typ, n, NULL::text AS key_space, NULL::int AS key_max, NULL::text[] AS space_types FROM open_quota
    UNION ALL
    SELECT typ, n, NULL, NULL, NULL FROM unnest($3::text[], $4::int[]) AS q(typ, n)`

// claimReadyFirst, claimReadyThen and claimReadyEnd, with a filter
// between them (claimReadyPlain or claimReadyKeyed), search the ready
// tasks: of a priority above 0 first (ready_first), then of priority 0
// (ready).
const claimReadyFirst = `ready_first AS (
    -- The ready tasks of a priority above 0, the highest first (their own
    -- index, empty while no task has one).
    SELECT r.task_id, q.typ AS task_type, r.priority, r.wake_at AS at, r.limit_key FROM quota q
    CROSS JOIN LATERAL (
        SELECT t.task_id, t.priority, t.wake_at, t.limit_key FROM corotask.tasks t
        WHERE t.claim IS NULL AND t.done_at IS NULL AND t.wake_at IS NOT NULL AND t.priority > 0
          AND t.wake_at <= corotask.now() AND t.task_type = q.typ`

const claimReadyThen = `
        ORDER BY t.priority DESC, t.wake_at
        LIMIT q.n
        FOR UPDATE OF t SKIP LOCKED
    ) r
), ready AS (
    -- Then those of priority 0, the oldest first, from each type's floor.
    SELECT r.task_id, q.typ AS task_type, 0::smallint AS priority, r.wake_at AS at, r.limit_key FROM quota q
    JOIN floors f ON f.typ = q.typ
    CROSS JOIN LATERAL (
        SELECT t.task_id, t.wake_at, t.limit_key FROM corotask.tasks t
        WHERE t.claim IS NULL AND t.done_at IS NULL AND t.wake_at IS NOT NULL AND t.priority = 0
          AND t.wake_at >= f.at AND t.wake_at <= corotask.now() AND t.task_type = q.typ`

const claimReadyEnd = `
        ORDER BY t.wake_at
        LIMIT greatest(q.n - (SELECT count(*) FROM ready_first h WHERE h.task_type = q.typ), 0)
        FOR UPDATE OF t SKIP LOCKED
    ) r`

// claimReadyPlain is Claim's search of the ready tasks: no key space
// holds any back.
const claimReadyPlain = claimReadyFirst + claimReadyThen + claimReadyEnd

// claimStale searches the expired claims (ClaimControlled adds a
// filter: a paused type waits), up to claimStaleTail.
const claimStale = `stale AS (
    -- Only when $12 asks: otherwise a one-time filter makes it read nothing.
    SELECT task_id, root_id, task_type, attempts, claimed_by, claimed_at, priority, claim_expires_at, limit_key FROM corotask.tasks
    WHERE $12::boolean AND claim IS NOT NULL AND claim_expires_at < corotask.now()
      AND claim_expires_at >= coalesce($11::timestamptz, '-infinity')
      AND done_at IS NULL AND task_type = ANY($6::text[])
      AND task_id <> ALL (coalesce($8::uuid[], '{}'))`

// claimStaleTail ends the search of the expired claims.
const claimStaleTail = `
    ORDER BY claim_expires_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED`

// claimCandidates is what a claim may take: the expired claims,
// then the ready tasks.
const claimCandidates = `candidates AS (
    SELECT task_id, task_type, 0 AS k, priority, claim_expires_at AS at, limit_key FROM stale
    UNION ALL SELECT task_id, task_type, 1, priority, at, limit_key FROM ready_first
    UNION ALL SELECT task_id, task_type, 1, priority, at, limit_key FROM ready`

// claimPickedPlain is Claim's choice among the candidates.
const claimPickedPlain = `gained AS (
    -- Whether a type polled has flow controls, read once (picked and the
    -- last row use it).
    SELECT EXISTS (SELECT 1 FROM corotask.type_controls x WHERE x.task_type = ANY ($6::text[])) AS yes
), picked AS (
    -- Stale claims first, then ready tasks by priority and age, each capped
    -- type within its free slots over both. Nothing when a type polled has
    -- flow controls: the executor claims with ClaimControlled then.
    SELECT p.task_id FROM (
        SELECT c.task_id, c.k, c.priority, c.at, q.n AS cap,
               row_number() OVER (PARTITION BY c.task_type ORDER BY c.k, c.priority DESC, c.at) AS rank
        FROM candidates c
        LEFT JOIN unnest($3::text[], $4::int[]) AS q(typ, n) ON q.typ = c.task_type
        WHERE NOT (SELECT yes FROM gained)
    ) p
    WHERE p.cap IS NULL OR p.rank <= p.cap
    ORDER BY p.k, p.priority DESC, p.at
    LIMIT $2`

// claimUpdate claims the picked tasks, up to claimUpdateTail
// (ClaimControlled sets tasks.counted too).
const claimUpdate = `claimed AS (
    UPDATE corotask.tasks t SET
        heartbeat = now(),
        claim_expires_at = corotask.now() + make_interval(secs => $5),
        claim = gen_random_uuid(),
        inbox_len = t.inbox_len + t.inbox_next_len,
        inbox_next_len = 0,
        next_wakes = false,
        failures = t.failures + CASE WHEN t.claim IS NULL THEN 0 ELSE 1 END,
        last_error = CASE WHEN t.claim IS NULL THEN t.last_error ELSE '` + ClaimTakeoverError + `' END,
        attempts = t.attempts + 1,
        claimed_by = $7,
        claimed_at = now(),`

// claimUpdateTail ends the SET of the claim.
const claimUpdateTail = `
        -- The reasons the task is due move to the high byte, where this
        -- poll's stay (see the column's comment); a takeover adds retry to
        -- those of the attempt it takes over.
        woke = CASE WHEN t.claim IS NULL THEN (t.woke & 127) << 8
                    ELSE (((t.woke >> 8) | t.woke | 16) & 127) << 8 END`

// claimReturning is what the claim returns of each task it claims.
const claimReturning = `RETURNING t.task_id, t.task_type, t.parent_id, t.root_id, t.inner_state, t.claim, t.failures, t.attempts, t.trace,
        t.msg_popped, t.msg_seq, t.inbox_len, t.task_key, t.woke >> 8 AS woke`

// claimTail records the takeovers and returns the rows, up to the
// next wake_at of the last row.
const claimTail = claimTakenOver + claimRows

// claimTakenOver records the takeovers.
const claimTakenOver = `taken_over AS (
    -- The attempt whose expired claim the statement took over.
    INSERT INTO corotask.history (task_id, root_id, attempt, outcome, executor_id, claimed_at, error)
    SELECT s.task_id, s.root_id, s.attempts, 'taken_over', s.claimed_by, s.claimed_at, '` + ClaimTakeoverError + `'
    FROM stale s WHERE s.task_id IN (SELECT task_id FROM claimed)
    ON CONFLICT DO NOTHING
)`

// claimRows returns the claimed rows, up to the next wake_at of the last
// row.
const claimRows = `
SELECT c.task_id, c.task_type, c.parent_id, c.root_id, c.inner_state,
       CASE WHEN w.short THEN f.envelopes ELSE w.envelopes END,
       CASE WHEN w.short THEN f.seqs ELSE w.seqs END,
       c.inbox_len > w.lim, c.claim, c.failures, c.attempts,
       c.task_id = ANY (ARRAY(SELECT task_id FROM stale)), corotask.now(), c.trace, NULL::timestamptz[], NULL::timestamptz,
       c.task_key, c.woke
FROM claimed c
-- The window of a task with messages: the first lim of its inbox, read
-- here in the statement's snapshot. When the task's row changed after the
-- statement began (a send, or an operator's drop, committed meanwhile, whose
-- row version the claim's lock then followed), that snapshot may lack the
-- send's messages or still hold the dropped one: the row's version in the
-- snapshot is not the one claimed (another msg_seq, or an attempt more: each
-- operator action counts one), and inbox_window reads the window again in a
-- snapshot of its own (short). OFFSET 0 keeps the lateral subquery whole, so
-- that its WHERE is a one-time filter and a task without messages reads
-- nothing.
LEFT JOIN LATERAL (
    SELECT l.lim, r.envelopes, r.seqs,
           coalesce(cardinality(r.seqs), 0) <> least(c.inbox_len, l.lim)
           OR NOT EXISTS (SELECT 1 FROM corotask.tasks o WHERE o.task_id = c.task_id
                          AND o.msg_seq = c.msg_seq AND o.attempts = c.attempts - 1) AS short
    FROM (SELECT coalesce((SELECT q.n FROM unnest($6::text[], $9::int[]) AS q(typ, n) WHERE q.typ = c.task_type),
                          100) AS lim) l
    CROSS JOIN LATERAL (
        SELECT array_agg(m.envelope ORDER BY m.seq) AS envelopes, array_agg(m.seq ORDER BY m.seq) AS seqs
        FROM (SELECT m.envelope, m.seq FROM corotask.messages m
              WHERE m.task_id = c.task_id AND m.seq > c.msg_popped AND m.seq <= c.msg_seq
              ORDER BY m.seq LIMIT l.lim) m
    ) r
    WHERE c.inbox_len > 0
    OFFSET 0
) w ON true
-- The re-read, once, and only for a short window (a one-time filter too).
LEFT JOIN LATERAL (
    SELECT r.envelopes, r.seqs FROM corotask.inbox_window(c.task_id, c.msg_popped, c.msg_seq, w.lim) AS r
    WHERE w.short
    OFFSET 0
) f ON true
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, `

// claimNextWake is the earliest future wake_at of the types polled.
const claimNextWake = `(
    SELECT min(n.wake_at) FROM unnest($6::text[]) AS q(typ)
    CROSS JOIN LATERAL (
        SELECT wake_at FROM corotask.tasks
        WHERE claim IS NULL AND done_at IS NULL AND wake_at IS NOT NULL
          AND wake_at > corotask.now() AND task_type = q.typ
        ORDER BY wake_at
        LIMIT 1
    ) n)`

// claimFloorsTail ends the last row but for its last column: the next
// floors.
const claimFloorsTail = claimNextFloors + `, ` + claimNextStaleFloor + `, NULL`

// claimNextFloors is the next floor of each type's search.
const claimNextFloors = `(
    -- Each type's next floor: its oldest ready task in the statement's
    -- snapshot (locked or not; those this statement claims included), but
    -- no later than floorMargin before corotask.now().
    SELECT array_agg(least(r.wake_at, corotask.now() - interval '1 second') ORDER BY f.i)
    FROM unnest($6::text[], $10::timestamptz[]) WITH ORDINALITY AS f(typ, at, i)
    LEFT JOIN LATERAL (
        SELECT wake_at FROM corotask.tasks
        WHERE claim IS NULL AND done_at IS NULL AND wake_at IS NOT NULL
          AND wake_at >= coalesce(f.at, '-infinity') AND wake_at <= corotask.now() AND task_type = f.typ
        ORDER BY wake_at
        LIMIT 1
    ) r ON true
    WHERE $10::timestamptz[] IS NOT NULL)`

// claimNextStaleFloor is the next floor of the search for expired claims.
const claimNextStaleFloor = `(
    SELECT least(min(s.claim_expires_at), corotask.now() - interval '1 second') FROM (
        SELECT claim_expires_at FROM corotask.tasks
        WHERE claim IS NOT NULL AND claim_expires_at < corotask.now() AND claim_expires_at >= $11::timestamptz
          AND done_at IS NULL
        ORDER BY claim_expires_at
        LIMIT 1
    ) s
    WHERE $12::boolean AND $11::timestamptz IS NOT NULL)`

// ClaimFail ends a task taken over from an expired claim as failed, without
// polling it, and tells its parent: its type's MaxFailures is reached.
// Parameters: $1 the task, $2 the claim token. Returns whether it ended it.
const ClaimFail = `SELECT corotask.fail_claimed($1, $2)`
