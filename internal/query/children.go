package query

// Children returns the first $2 children of task $1, in the order they
// were created: their RowColumns.
const Children = `WITH ` + Served + ` SELECT ` + RowColumns + ` FROM served s, corotask.tasks t
	WHERE t.parent_id = $1 ORDER BY t.task_id LIMIT $2`

// ChildrenByStatus counts the children of task $1 in each status: it
// returns the status and the count, for the statuses some child is in.
const ChildrenByStatus = `WITH ` + Served + ` SELECT ` + Status + `, count(*) FROM served s, corotask.tasks t
	WHERE t.parent_id = $1 GROUP BY 1`
