package ui

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/tasks"
)

// served is a CTE that reads the executors once per statement: whether any
// has registered, and the types the live ones serve.
const served = `served AS MATERIALIZED (
	SELECT EXISTS (SELECT 1 FROM corotask.executors) AS registered,
	       ARRAY(SELECT DISTINCT x FROM corotask.executors e, unnest(e.task_types) AS x
	             WHERE e.expires_at > now()) AS types)`

// statusExpr is corotask.status(t), written out with the executors read
// once (s is the row of served). corotask.status, whose "unserved" reads the
// executors, cannot be inlined by the planner: called per row it costs a
// few microseconds, 100ms for a count over 20000 rows. A test checks that
// the two agree.
const statusExpr = `(CASE
	WHEN t.outcome IS NOT NULL THEN t.outcome
	WHEN t.claim IS NOT NULL AND t.claim_expires_at < now() THEN 'stale'
	WHEN t.claim IS NOT NULL THEN 'running'
	WHEN t.wake_at IS NULL THEN 'suspended'
	WHEN t.wake_at > now() AND t.failures > 0 THEN 'retrying'
	WHEN t.wake_at > now() THEN 'sleeping'
	WHEN s.registered AND NOT t.task_type = ANY (s.types) THEN 'unserved'
	ELSE 'ready'
END)`

// Index-friendly conditions that each status implies. They are added to the
// status test so that the planner can use the partial indexes of the claim
// (tasks_ready_idx, tasks_running_idx) and of retention (tasks_done_idx).
const (
	condWaiting   = `(t.claim IS NULL AND t.done_at IS NULL AND t.wake_at IS NOT NULL)`
	condSuspended = `(t.claim IS NULL AND t.done_at IS NULL AND t.wake_at IS NULL)`
	condClaimed   = `(t.claim IS NOT NULL)`
	condEnded     = `(t.done_at IS NOT NULL)`
	// condIndexed is every task one of the claim's partial indexes holds:
	// live and waiting for a time, or running.
	condIndexed = `(` + condWaiting + ` OR ` + condClaimed + `)`
	// condUnindexed is every other task: suspended or ended.
	condUnindexed = `(t.claim IS NULL AND (t.done_at IS NOT NULL OR t.wake_at IS NULL))`
)

// statusCondition returns the index-friendly condition status implies.
func statusCondition(s tasks.Status) string {
	switch {
	case s.Ended():
		return condEnded
	case s == "suspended":
		return condSuspended
	case s == "running" || s == "stale":
		return condClaimed
	default: // ready, sleeping, and the statuses of waiting tasks
		return condWaiting
	}
}

// unservedTypes returns the types of ready tasks that no live executor
// serves, once executors have registered; it reads the claim's index.
func unservedTypes(ctx context.Context, db tasks.DB) ([]string, error) {
	rows, err := db.Query(ctx, `WITH `+served+` SELECT DISTINCT t.task_type FROM served s, corotask.tasks t
		WHERE t.claim IS NULL AND t.done_at IS NULL AND t.wake_at IS NOT NULL AND t.wake_at <= now()
		  AND s.registered AND NOT t.task_type = ANY (s.types)
		ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("unserved types: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("unserved types: %w", err)
	}
	return out, nil
}

// statusSQL is statusExpr with what it needs: for the test that checks it
// against corotask.status.
const statusSQL = `WITH ` + served + ` SELECT t.task_id, ` + statusExpr + `, corotask.status(t) FROM served s, corotask.tasks t`
