package query

// Stats counts the tasks of each type in each status, and measures how
// long the oldest ready (or unserved) task of each has waited past its
// wake_at, in seconds (0 when none is): it returns task_type, status,
// count and the wait, for each pair some task is in. It reads every task.
const Stats = `WITH ` + Served + `
SELECT x.task_type, x.status, count(*),
       coalesce(extract(epoch FROM corotask.now() - min(x.wake_at) FILTER (WHERE x.status IN ('ready', 'unserved'))), 0)
FROM (SELECT t.task_type, ` + Status + ` AS status, t.wake_at FROM served s, corotask.tasks t) x
GROUP BY 1, 2`
