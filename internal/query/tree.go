package query

// Tree returns task $1 and its descendants, breadth first (all the children
// of a level before any grandchild) and at most $2 of them: the RowColumns
// of each, then its depth below $1 (0 for $1 itself). It returns no row
// when $1 does not exist.
//
// A recursive query is evaluated level by level, and only as far as the
// LIMIT needs. A task has one parent, so the walk down from $1 meets a task
// twice only through a parent cycle (rows written by hand: the functions
// that create tasks refuse it), and such a cycle passes through $1 (the
// tasks below it lead up to it): not descending into $1 again visits each
// task once, whatever the rows say.
const Tree = `WITH RECURSIVE ` + Served + `, tree AS (
	SELECT ` + RowColumns + `, 0 AS depth
	FROM served s, corotask.tasks t WHERE t.task_id = $1
	UNION ALL
	SELECT ` + RowColumns + `, tree.depth + 1
	FROM served s, tree JOIN corotask.tasks t ON t.parent_id = tree.task_id
	WHERE t.task_id <> $1
)
SELECT * FROM tree LIMIT $2`
