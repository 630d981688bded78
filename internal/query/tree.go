package query

import "github.com/jackc/pgx/v5"

// TreeWalkExecMode is how TreeWalk is run: pgx then sends its parameters
// in the statement's text, each escaped as a literal, since Citus routes a
// recursive query to the shard of its tree only when the value of its
// filter on the distribution column is in the text. Its IDs are passed as
// UUIDs (tasks.ID.UUID): in the text, a tasks.ID would be its ULID. TreeWalk
// is a read of the CLI and the UI, planned at each run either way.
const TreeWalkExecMode = pgx.QueryExecModeSimpleProtocol

// TreeRoot returns the root of the tree of task $1 (root_id), no row when
// $1 does not exist: TreeWalk's and Tree's $3.
const TreeRoot = `SELECT root_id FROM corotask.tasks WHERE task_id = $1`

// TreeWalk returns the IDs of task $1 and of its descendants, breadth first
// (all the children of a level before any grandchild) and at most $2 of
// them, each with its depth below $1 (0 for $1 itself). $3 is the root of
// $1's tree (TreeRoot), which every task below $1 shares: each level names
// it, so that on Citus, which keeps a tree on one shard, the walk runs on
// that shard (Citus refuses a recursive query without such a filter, or
// beside a statement over every shard: Tree reads the rows).
//
// A recursive query is evaluated level by level, and only as far as the
// LIMIT needs. A task has one parent, so the walk down from $1 meets a task
// twice only through a parent cycle (rows written by hand: the functions
// that create tasks refuse it), and such a cycle passes through $1 (the
// tasks below it lead up to it): not descending into $1 again visits each
// task once, whatever the rows say.
const TreeWalk = `WITH RECURSIVE walk AS (
	SELECT t.task_id, 0 AS depth FROM corotask.tasks t WHERE t.task_id = $1 AND t.root_id = $3
	UNION ALL
	SELECT t.task_id, walk.depth + 1
	FROM walk JOIN corotask.tasks t ON t.parent_id = walk.task_id
	WHERE t.task_id <> $1 AND t.root_id = $3
)
SELECT task_id, depth FROM walk LIMIT $2`

// Tree returns the tasks $1 of the tree whose root is $3, as TreeWalk
// returned them with their depths $2: the RowColumns of each, then its
// depth, in that order.
const Tree = `WITH ` + Served + `
SELECT ` + RowColumns + `, w.depth
FROM served s, unnest($1::uuid[], $2::int[]) WITH ORDINALITY AS w(task_id, depth, i)
JOIN corotask.tasks t ON t.task_id = w.task_id AND t.root_id = $3
ORDER BY w.i`
