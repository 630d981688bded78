-- corotask schema, version 10: task keys. A task may carry a key, a name
-- its creator gives it (an order number, a user's ID), unique among the
-- live tasks of its type: corotask.send_to_key sends a message to the live
-- task of a type with a key, creating it first when there is none, and
-- tasks.GetByKey finds it. A key is free again once its task has ended
-- (done, failed or canceled): the next task with it starts afresh.
--
-- The unique index holds only the live tasks that have a key: a task
-- without one costs nothing more to create, end or delete, and a task with
-- one leaves the index when it ends. A key is 1 to 200 bytes of text with
-- no control character (it reaches an operator's terminal through
-- corotask ls, show and tree); tasks.ValidateKey checks the same in Go.
--
-- Builds of migration 9 run on this schema: they never set a key, and
-- their create_tasks and commit_polls signatures stay.
-- compatible-from: 9
--
-- Cost of the upgrade: adding the column rewrites nothing (no default); the
-- constraint is added NOT VALID, as every existing row holds NULL, so that
-- it does not scan the table (new and updated rows are checked all the
-- same); building the partial indexes reads the table twice and stores nothing.

ALTER TABLE corotask.tasks
    ADD COLUMN task_key text,
    ADD CONSTRAINT tasks_key_valid
        CHECK (octet_length(task_key) BETWEEN 1 AND 200 AND task_key !~ '[\x01-\x1f\x7f-\x9f]') NOT VALID;

COMMENT ON COLUMN corotask.tasks.task_key IS
'The task''s key (NULL: none): unique among the live tasks of its type (tasks_live_key), free again once the task has ended. See corotask.send_to_key.';

CREATE UNIQUE INDEX tasks_live_key ON corotask.tasks (task_type, task_key)
    WHERE task_key IS NOT NULL AND done_at IS NULL;

-- Finding every task with a key, live or ended, of any type (corotask ls
-- --key, the web UI's key filter) reads this one, which holds only the
-- tasks that have a key.
CREATE INDEX tasks_key ON corotask.tasks (task_key) WHERE task_key IS NOT NULL;
