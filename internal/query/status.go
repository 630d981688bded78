package query

//go:generate go test -run TestStatusFollowsTheFunction -update .

// Served is a common table expression, for a WITH, that reads the
// executors once per statement: whether any has registered, and the types
// the live ones serve; and corotask.now(), the time statuses are computed
// against. Status reads its row as s.
const Served = `served AS MATERIALIZED (
	SELECT corotask.now() AS now, EXISTS (SELECT 1 FROM corotask.executors) AS registered,
	       ARRAY(SELECT DISTINCT x FROM corotask.executors e, unnest(e.task_types) AS x
	             WHERE e.expires_at > now()) AS types)`

// Index-friendly conditions on t, the tasks row, that statuses imply. A
// statement adds them to a test of Status so that the planner can use the
// partial indexes of the claim (tasks_ready_idx, tasks_running_idx) and of
// retention (tasks_done_idx).
const (
	// Waiting holds the tasks that wait for a time (ready, paused,
	// limited, unserved, sleeping, retrying): the predicate of
	// tasks_ready_idx.
	Waiting = `(t.claim IS NULL AND t.done_at IS NULL AND t.wake_at IS NOT NULL)`
	// Suspended holds the live tasks that wait for a message.
	Suspended = `(t.claim IS NULL AND t.done_at IS NULL AND t.wake_at IS NULL)`
	// Claimed holds the tasks an executor holds (running, stale): the
	// predicate of tasks_running_idx.
	Claimed = `(t.claim IS NOT NULL)`
	// Ended holds the tasks done, failed or canceled: the predicate of
	// tasks_done_idx.
	Ended = `(t.done_at IS NOT NULL)`
	// Indexed is every task one of the claim's partial indexes holds: live
	// and waiting for a time, or claimed.
	Indexed = `(` + Waiting + ` OR ` + Claimed + `)`
	// Unindexed is every other task: suspended or ended.
	Unindexed = `(t.claim IS NULL AND (t.done_at IS NOT NULL OR t.wake_at IS NULL))`
)

// StatusCondition returns the index-friendly condition that the status
// named status implies (Waiting for a name it does not know, which no task
// has).
func StatusCondition(status string) string {
	switch status {
	case "done", "failed", "canceled":
		return Ended
	case "suspended":
		return Suspended
	case "running", "stale":
		return Claimed
	default: // ready, paused, limited, unserved, sleeping, retrying
		return Waiting
	}
}
