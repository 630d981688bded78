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
-- Builds of migration 12 run on this schema: they never read the table, so
-- they create keyed tasks as if no type had a window.
-- compatible-from: 12
--
-- Cost of the upgrade: creating an empty table.

CREATE TABLE corotask.key_windows (
    task_type text PRIMARY KEY,
    keep      interval NOT NULL CHECK (keep > '0')
);

COMMENT ON TABLE corotask.key_windows IS
'How long a key stays reserved after its task ended, per task type (none without a row). See tasks.SetKeyWindow.';
