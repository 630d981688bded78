package query

// TaskColumns are the columns of a task as tasks.Task holds it, in the
// order tasks' scanTask reads them: t is the tasks row, s the row of Served.
// UpdatedAt's, when the task last changed hands, reads the task's last
// attempt in its history. The subqueries of the task's other rows (its
// history, its messages) name its root as well as its ID: Citus, which
// keeps each tree's rows on one shard, joins the rows of distributed tables
// only on that column (see docs/scaling.md). (A takeover's row written by a
// build of schema 14 has no root, and is not read here.)
const TaskColumns = `t.task_id, t.parent_id, t.task_type, ` + Status + `, t.inner_state, t.result,
	t.wake_at, t.heartbeat, t.inbox_len, t.inbox_next_len, t.failures,
	coalesce(t.last_error, ''), t.created_at, t.done_at, t.attempts, t.live_children, t.awaiting_children AND t.done_at IS NULL,
	CASE WHEN t.claim IS NOT NULL THEN t.claimed_by END, CASE WHEN t.claim IS NOT NULL THEN t.claimed_at END,
	GREATEST(t.created_at, t.claimed_at, t.done_at, (SELECT h.finished_at FROM corotask.history h
		WHERE h.task_id = t.task_id AND h.root_id = t.root_id AND h.seq = 0 ORDER BY h.attempt DESC LIMIT 1)),
	coalesce(t.task_key, ''), t.priority, coalesce(t.limit_key, ''), t.root_id`

// TaskGet reads task $1: its TaskColumns, then the envelopes of its inbox
// and of its inbox_next, each oldest first. The inbox holds the task's
// messages up to msg_seq - inbox_next_len; those after it arrived while an
// executor held the task.
const TaskGet = taskWithMessages + `WHERE t.task_id = $1`

// TaskGetByKey reads the live task of type $1 with key $2 as TaskGet
// reads a task, through the unique index of live keys.
const TaskGetByKey = taskWithMessages + `WHERE t.task_type = $1 AND t.task_key = $2 AND t.done_at IS NULL`

// taskWithMessages reads a task as TaskGet does, up to its WHERE.
const taskWithMessages = `WITH ` + Served + `
SELECT ` + TaskColumns + `,
	ARRAY(SELECT m.envelope FROM corotask.messages m
		WHERE m.task_id = t.task_id AND m.root_id = t.root_id AND m.seq > t.msg_popped AND m.seq <= t.msg_seq - t.inbox_next_len
		ORDER BY m.seq),
	ARRAY(SELECT m.envelope FROM corotask.messages m
		WHERE m.task_id = t.task_id AND m.root_id = t.root_id AND m.seq > t.msg_seq - t.inbox_next_len
		ORDER BY m.seq)
FROM served s, corotask.tasks t `

// TaskExists says whether task $1 exists.
const TaskExists = `SELECT EXISTS (SELECT 1 FROM corotask.tasks WHERE task_id = $1)`

// TaskLock locks the row of task $1 until the transaction ends, so that no
// commit changes the task between what the transaction reads of it and
// what it does; it returns 1, or no row when the task does not exist.
const TaskLock = `SELECT 1 FROM corotask.tasks WHERE task_id = $1 FOR UPDATE`

// TasksCreate creates tasks in one statement, through
// corotask.create_tasks: the arrays @ids, @types, @parents, @states,
// @messages and @wake_ats hold one entry per task (NULL: no parent, the
// poller's zero state, no message, now). TasksCreateTraced passes
// @traces too, the trace context of each, to the seven-argument form;
// TasksCreateKeyed passes @traces (NULL: none) and @keys, the key of each
// (NULL: none), to the eight-argument form (migration 10);
// TasksCreateControlled passes @traces, @keys (NULL: none), @priorities and
// @limit_keys (NULL: none) to the ten-argument form (migration 14).
const (
	TasksCreate = `SELECT corotask.create_tasks(@ids::uuid[], @types::text[], @parents::uuid[],
	@states::jsonb[], @messages::jsonb[], @wake_ats::timestamptz[])`
	TasksCreateTraced = `SELECT corotask.create_tasks(@ids::uuid[], @types::text[], @parents::uuid[],
	@states::jsonb[], @messages::jsonb[], @wake_ats::timestamptz[], @traces::jsonb[])`
	TasksCreateKeyed = `SELECT corotask.create_tasks(@ids::uuid[], @types::text[], @parents::uuid[],
	@states::jsonb[], @messages::jsonb[], @wake_ats::timestamptz[], @traces::jsonb[], @keys::text[])`
	TasksCreateControlled = `SELECT corotask.create_tasks(@ids::uuid[], @types::text[], @parents::uuid[],
	@states::jsonb[], @messages::jsonb[], @wake_ats::timestamptz[], @traces::jsonb[], @keys::text[],
	@priorities::smallint[], @limit_keys::text[])`
)

// Now is corotask's clock in the database (corotask.now(): the
// transaction's time, unless a test's clock set it): what decides when a
// task is due, and what the derived statuses are computed against.
const Now = `SELECT corotask.now()`
