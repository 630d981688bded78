package query

// RetentionDelete deletes up to $2 tasks that ended more than $1 seconds
// ago and have no children (leaves first: their parents go at a later
// pass), with their history and their messages, skipping locked ones.
// Returns how many tasks it deleted.
const RetentionDelete = `WITH deleted AS (
			DELETE FROM corotask.tasks WHERE task_id IN (
				SELECT t.task_id FROM corotask.tasks t
				WHERE t.done_at IS NOT NULL AND t.done_at < corotask.now() - make_interval(secs => $1)
				  AND NOT EXISTS (SELECT 1 FROM corotask.tasks c WHERE c.parent_id = t.task_id)
				ORDER BY t.done_at LIMIT $2 FOR UPDATE SKIP LOCKED)
			RETURNING task_id
		), history AS (
			DELETE FROM corotask.history h USING deleted d WHERE h.task_id = d.task_id
		), messages AS (
			DELETE FROM corotask.messages m USING deleted d WHERE m.task_id = d.task_id
		)
		SELECT count(*) FROM deleted`
