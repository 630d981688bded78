package query

// The web UI's lists of tasks besides TaskList, Children and Tree: the
// RowColumns of each task.
const (
	// UIFailingLive returns the live tasks whose last poll failed, the
	// newest first, at most $1 of them. The subquery is fenced (OFFSET 0)
	// so that the planner reads the claim's partial indexes rather than
	// walk the primary key backwards through every ended task.
	UIFailingLive = `WITH ` + Served + ` SELECT * FROM (SELECT ` + RowColumns + ` FROM served s, corotask.tasks t
		WHERE ` + LiveWithFailures + ` OFFSET 0) s ORDER BY task_id DESC LIMIT $1`
	// UIRecentlyFailed returns the tasks that failed in the last hour, the
	// latest first and at most $1 of them, among the last 10000 that ended
	// (so that a table of a million successes costs no more than that to
	// look through).
	UIRecentlyFailed = `WITH ` + Served + ` SELECT ` + RowColumns + ` FROM served s, (
			SELECT * FROM corotask.tasks t WHERE t.done_at > corotask.now() - interval '1 hour'
			ORDER BY t.done_at DESC LIMIT 10000) t
		WHERE t.outcome = 'failed' ORDER BY t.done_at DESC LIMIT $1`
)
