package query

// Ready holds the tasks of t, the tasks row, that are due now and that no
// executor holds: those the next claim may take (ready or unserved). It is
// Waiting, the predicate of tasks_ready_idx, and a bound on that index's
// wake_at.
const Ready = `(` + Waiting + ` AND t.wake_at <= corotask.now())`

// ReadyByType counts the ready tasks of each type and measures how long the
// oldest has waited past its wake_at, exactly, through the ready-tasks
// index. It returns task_type, the count and the wait in seconds (float8).
const ReadyByType = `SELECT t.task_type, count(*), extract(epoch FROM corotask.now() - min(t.wake_at))::float8
FROM corotask.tasks t
WHERE ` + Ready + `
GROUP BY 1`

// ReadyOldestByType is ReadyByType over at most $1 entries of the
// ready-tasks index, the oldest: its cost is bounded whatever the backlog
// (the index holds task_type, so it is an index-only scan), and a type
// whose ready tasks are all newer than those is left out.
const ReadyOldestByType = `SELECT r.task_type, count(*), extract(epoch FROM corotask.now() - min(r.wake_at))::float8
FROM (
    SELECT t.task_type, t.wake_at FROM corotask.tasks t
    WHERE ` + Ready + `
    ORDER BY t.wake_at
    LIMIT $1
) r
GROUP BY r.task_type`
