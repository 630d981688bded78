package query

// Executors lists the registered executors, the oldest first: executor_id,
// host, pid, version, task_types, concurrency, started_at, last_seen,
// expires_at, whether it is stale (expired without having stopped),
// stopped_at, and how many tasks it holds a claim on. The claims are
// counted once, grouped by executor, rather than in a subquery per executor:
// Citus runs no subquery of a distributed table correlated with a
// reference table's rows.
const Executors = `SELECT e.executor_id, e.host, e.pid, e.version, e.task_types, e.concurrency,
	       e.started_at, e.last_seen, e.expires_at, e.expires_at <= now() AND e.stopped_at IS NULL, e.stopped_at,
	       coalesce(c.n, 0)
	FROM corotask.executors e
	LEFT JOIN (SELECT t.claimed_by, count(*) AS n FROM corotask.tasks t
	           WHERE t.claim IS NOT NULL GROUP BY t.claimed_by) c ON c.claimed_by = e.executor_id
	ORDER BY e.started_at, e.executor_id`

// ExecutorsByID returns the executor_id, host and pid of the registered
// executors among $1 (an array of IDs).
const ExecutorsByID = `SELECT executor_id, host, pid FROM corotask.executors WHERE executor_id = ANY ($1)`

// ExecutorsLive counts the live executors (not expired, not stopped), sums
// their concurrency, and counts the tasks claimed.
const ExecutorsLive = `SELECT count(*), coalesce(sum(concurrency), 0),
		(SELECT count(*) FROM corotask.tasks t WHERE t.claim IS NOT NULL)
	FROM corotask.executors WHERE expires_at > now() AND stopped_at IS NULL`

// ExecutorsUnserved returns the types of ready tasks that no live executor
// serves, once executors have registered, in order; it reads the claim's
// index.
const ExecutorsUnserved = `WITH ` + Served + ` SELECT DISTINCT t.task_type FROM served s, corotask.tasks t
	WHERE ` + Ready + ` AND s.registered AND NOT t.task_type = ANY (s.types)
	ORDER BY 1`
