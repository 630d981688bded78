-- corotask schema, version 8: a task can wait for all its children at once
-- (executor.AwaitChildren). Each task counts its children that have not
-- ended; a task that awaits its children is woken by the completion of the
-- last of them, or by any other message, not by each completion.
--
-- Cost of the upgrade: adding the columns rewrites nothing (their defaults
-- are constants); the count is then filled in for the tasks that have live
-- children, one UPDATE of those rows only.

ALTER TABLE corotask.tasks
    -- Children of this task that have not ended: raised when they are
    -- created, lowered when their completion message is delivered.
    ADD COLUMN live_children integer NOT NULL DEFAULT 0,
    -- The task's last poll returned AwaitChildren: completions do not wake
    -- it while live_children stays above zero.
    ADD COLUMN awaiting_children boolean NOT NULL DEFAULT false;

COMMENT ON COLUMN corotask.tasks.live_children IS
'Children of this task that have not ended: raised when they are created, lowered when their completion message is delivered.';
COMMENT ON COLUMN corotask.tasks.awaiting_children IS
'The last poll returned AwaitChildren: a completion wakes the task only when it was the last live child''s; any other message wakes it.';

UPDATE corotask.tasks p SET live_children = c.n
FROM (
    SELECT parent_id, count(*)::integer AS n FROM corotask.tasks
    WHERE parent_id IS NOT NULL AND done_at IS NULL
    GROUP BY parent_id
) c
WHERE p.task_id = c.parent_id AND p.done_at IS NULL;
