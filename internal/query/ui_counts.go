package query

// The web UI's counts of tasks, exact or estimated from a sample of the
// table.
const (
	// UICountsEstimate is the planner's estimate of the rows of the tasks
	// table.
	UICountsEstimate = `SELECT greatest(reltuples, 0) FROM pg_class WHERE oid = 'corotask.tasks'::regclass`
	// UICountsWaitingEstimate is the planner's estimate of the entries of
	// the ready-tasks index: the tasks waiting for a time.
	UICountsWaitingEstimate = `SELECT greatest(reltuples, 0) FROM pg_class WHERE oid = 'corotask.tasks_ready_idx'::regclass`
)

// UICountsAll counts the tasks of each type (only those of type $1, unless
// it is empty) in each status: it returns task_type, status and the count
// (float8). UICountsClaimed and UICountsIndexed count only the tasks that
// Claimed and Indexed hold; UICountsSampledUnclaimed and
// UICountsSampledUnindexed count the others, in a $2% block sample of the
// table.
const (
	UICountsAll              = uiCounts + `true` + uiCountsOfType
	UICountsClaimed          = uiCounts + Claimed + uiCountsOfType
	UICountsIndexed          = uiCounts + Indexed + uiCountsOfType
	UICountsSampledUnclaimed = uiCountsSampled + `NOT ` + Claimed + uiCountsOfType
	UICountsSampledUnindexed = uiCountsSampled + Unindexed + uiCountsOfType

	uiCounts        = `WITH ` + Served + ` SELECT t.task_type, ` + Status + `, count(*)::float8 FROM served s, corotask.tasks t WHERE `
	uiCountsSampled = `WITH ` + Served + ` SELECT t.task_type, ` + Status + `, count(*)::float8 FROM served s, corotask.tasks t TABLESAMPLE SYSTEM ($2) WHERE `
	uiCountsOfType  = ` AND ($1 = '' OR t.task_type = $1) GROUP BY 1, 2`
)

// UIThroughput counts the tasks of each type that ended in each 5 minutes
// of the last hour (bucket 0 the latest, 11 the earliest), and those of
// them that failed: task_type, bucket, ended and failed (float8).
// UIThroughputSampled does the same on a $1% block sample of the table.
const (
	UIThroughput        = uiThroughputSelect + uiThroughputWhere
	UIThroughputSampled = uiThroughputSelect + ` TABLESAMPLE SYSTEM ($1)` + uiThroughputWhere
	uiThroughputSelect  = `SELECT t.task_type, least(11, floor(extract(epoch FROM corotask.now() - t.done_at) / 300))::int,
		count(*)::float8, (count(*) FILTER (WHERE t.outcome = 'failed'))::float8
	FROM corotask.tasks t`
	uiThroughputWhere = ` WHERE t.done_at > corotask.now() - interval '1 hour' GROUP BY 1, 2`
)
