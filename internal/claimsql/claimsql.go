// Package claimsql holds the executor's claim statement, so that the
// benchmarks (internal/bench) measure the very statement executors run.
package claimsql

import "strings"

// SQL is the claim statement, with (true) or without (false) the search for
// stale claims. It claims, in one statement, up to $2 tasks: ready tasks of the
// uncapped types $1 (oldest wake_at first), ready tasks of each capped type
// $3 up to its free slots $4, and tasks of any type $6 whose heartbeat is
// older than $5 seconds (their executor died or stalled). A claimed task gets
// a fresh claim token, and any inbox_next a dead poll left joins its inbox.
// The last row (task_id NULL) carries the earliest future wake_at of those
// types, so the executor knows when to look again.
//
// Run it after GenericPlan, in the same transaction.
var SQL = map[bool]string{true: claimSQLTemplate, false: strings.Replace(claimSQLTemplate, staleCTE, noStaleCTE, 1)}

// GenericPlan makes the claim run on its cached generic plan. Left to
// itself (plan_cache_mode = auto), PostgreSQL re-plans the claim at every
// execution: its CTEs make planning cost as much as a small claim's
// execution, while a generic plan that joined picked to the table would scan
// the whole table. The claim therefore updates by "task_id = ANY (ARRAY(...))",
// which is an index probe in every plan, and forces the generic plan, built
// once per connection. SET LOCAL keeps the setting to the claim's own
// transaction, so the caller's pool is left as it was.
const GenericPlan = "SET LOCAL plan_cache_mode = force_generic_plan"

const staleCTE = `stale AS (
    SELECT task_id FROM corotask.tasks
    WHERE heartbeat <> '0001-01-01 00:00:00+00' AND heartbeat < now() - make_interval(secs => $5)
      AND done_at IS NULL AND task_type = ANY($6::text[])
    ORDER BY heartbeat
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)`

const noStaleCTE = `stale AS (SELECT task_id FROM corotask.tasks WHERE false AND $5::float8 > 0)`

const claimSQLTemplate = `
WITH open_ready AS (
    SELECT task_id FROM corotask.tasks
    WHERE heartbeat = '0001-01-01 00:00:00+00' AND done_at IS NULL AND wake_at IS NOT NULL
      AND wake_at <= now() AND task_type = ANY($1::text[])
    ORDER BY wake_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
), capped_ready AS (
    SELECT r.task_id FROM unnest($3::text[], $4::int[]) AS q(typ, n)
    CROSS JOIN LATERAL (
        SELECT task_id FROM corotask.tasks
        WHERE heartbeat = '0001-01-01 00:00:00+00' AND done_at IS NULL AND wake_at IS NOT NULL
          AND wake_at <= now() AND task_type = q.typ
        ORDER BY wake_at
        LIMIT q.n
        FOR UPDATE SKIP LOCKED
    ) r
), ` + staleCTE + `, picked AS (
    SELECT task_id FROM (
        SELECT task_id FROM stale
        UNION ALL SELECT task_id FROM open_ready
        UNION ALL SELECT task_id FROM capped_ready
    ) p LIMIT $2
), claimed AS (
    UPDATE corotask.tasks t SET
        heartbeat = now(),
        claim = gen_random_uuid(),
        inbox = t.inbox || t.inbox_next,
        inbox_next = '{}'
    WHERE t.task_id = ANY (ARRAY(SELECT task_id FROM picked))
    RETURNING t.task_id, t.task_type, t.parent_id, t.inner_state, t.inbox, t.claim, t.failures
)
SELECT task_id, task_type, parent_id, inner_state, inbox, claim, failures, NULL::timestamptz FROM claimed
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, (
    SELECT wake_at FROM corotask.tasks
    WHERE heartbeat = '0001-01-01 00:00:00+00' AND done_at IS NULL AND wake_at IS NOT NULL
      AND wake_at > now() AND task_type = ANY($6::text[])
    ORDER BY wake_at
    LIMIT 1)`
