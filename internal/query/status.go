package query

//go:generate go test -run TestStatusFollowsTheFunction -update .

// Served is a common table expression, for a WITH, that reads the
// executors once per statement: whether any has registered, and the types
// the live ones serve; corotask.now(), the time statuses are computed
// against; and the types that flow control holds back (PausedTypes,
// HeldTypes, FullKeys). Status reads its row as s.
const Served = `served AS MATERIALIZED (
	SELECT corotask.now() AS now, EXISTS (SELECT 1 FROM corotask.executors) AS registered,
	       ARRAY(SELECT DISTINCT x FROM corotask.executors e, unnest(e.task_types) AS x
	             WHERE e.expires_at > now()) AS types,
	       ARRAY(` + PausedTypes + `) AS paused,
	       ARRAY(` + HeldTypes + `) AS held,
	       ARRAY(SELECT ROW(x.task_type, x.limit_key) FROM (` + FullKeys + `) x) AS full_keys)`

// The types and keys that flow control holds back, which Served reads once
// per statement: the generated Status tests them where the SQL function
// corotask.status tests each task's type and key (see statusFlow in
// status_test.go; TestStatusMatchesTheFunction checks that both agree).
const (
	// PausedTypes are the paused types.
	PausedTypes = `SELECT c.task_type FROM corotask.type_controls c WHERE c.paused_at IS NOT NULL`
	// HeldTypes are the types whose ready tasks are all limited: those
	// that run their max_running counted claims, and those whose rate
	// limit has no whole token. It is corotask.type_held over every row
	// of type_controls, spelled out (the bucket as rateTokens reads it; the
	// claims counted are those of the types with a maximum only, through
	// tasks_running_counted_idx): on Citus, a function of a table's row type cannot be
	// called on the rows of a reference table (whose rows on a worker are
	// of its shard's row type), nor read a distributed table from there.
	HeldTypes = `SELECT c.task_type FROM corotask.type_controls c
	LEFT JOIN (SELECT r.task_type, count(*) AS n FROM corotask.tasks r
	           WHERE r.task_type = ANY (ARRAY(SELECT x.task_type FROM corotask.type_controls x WHERE x.max_running IS NOT NULL))
	             AND r.claim IS NOT NULL AND r.counted AND r.claim_expires_at >= corotask.now() - interval '1 second'
	           GROUP BY r.task_type) r ON r.task_type = c.task_type
	LEFT JOIN corotask.rate_limits l ON l.name = c.rate_limit
	WHERE c.max_running <= coalesce(r.n, 0) OR ` + rateTokens + ` < 1`
	// FullKeys are the pairs of a type and a limit key whose key runs its
	// key space's max_running tasks (see corotask.key_full): a ready task
	// of that type and key is limited. It reads the running tasks that
	// have a limit key, once.
	FullKeys = `SELECT c.task_type, f.limit_key
	FROM (SELECT rc.key_space, r.limit_key
	      FROM corotask.tasks r
	      JOIN corotask.type_controls rc ON rc.task_type = r.task_type
	      JOIN corotask.key_limits k ON k.key_space = rc.key_space
	      WHERE r.limit_key IS NOT NULL AND r.claim IS NOT NULL AND r.claim_expires_at >= corotask.now() - interval '1 second'
	      GROUP BY rc.key_space, r.limit_key, k.max_running
	      HAVING count(*) >= k.max_running) f
	JOIN corotask.type_controls c ON c.key_space = f.key_space`
)

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
