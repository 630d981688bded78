-- corotask schema, version 13: key windows. A task type may keep a key
-- reserved for a while after its task has ended (done, failed or
-- canceled), so that a producer that retries a create within that time is
-- refused (ErrExists, naming the ended task) instead of creating a second
-- task: corotask.create_tasks, the keyed children of commit_polls and
-- corotask.send_to_key read this table for the keyed tasks they create
-- (tasks without a key never read it). tasks.SetKeyWindow and `corotask
-- key-window` set a type's window; a type without a row has none.
--
-- The window counts from the ended task's done_at (corotask.now()), as
-- retention does: deleting the ended task (retention, tasks.Delete) ends
-- its window early.
--
-- Every role with USAGE on the schema may read the table: commit_polls,
-- which runs with the executor's rights, reads it for keyed children, and
-- the grants of executors made before this migration name the tables of
-- their time. Setting a window takes INSERT, UPDATE and DELETE on it.
--
-- Builds of migration 12 run on this schema: the functions keep their
-- signatures, and the windows apply to the tasks they create as to any
-- (the functions that check them are this build's, which an older build
-- never puts back).
-- compatible-from: 12
--
-- Cost of the upgrade: creating an empty table.

CREATE TABLE corotask.key_windows (
    task_type text PRIMARY KEY,
    keep      interval NOT NULL CHECK (keep > '0')
);

COMMENT ON TABLE corotask.key_windows IS
'How long a key stays reserved after its task ended, per task type (none without a row). See tasks.SetKeyWindow.';

GRANT SELECT ON corotask.key_windows TO PUBLIC;
