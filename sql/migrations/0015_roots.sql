-- corotask schema, version 15: every task names the root of its workflow
-- tree. tasks.root_id is the ID of the task at the top of the task's tree:
-- its own ID for a task created without a parent, its parent's root_id for
-- a child (create_tasks, the children of commit_polls). Messages and history
-- rows carry their task's root_id too. A tree, its messages and its history
-- thus share one value, which is what a database split by workflow tree
-- (Citus, see docs/scaling.md) distributes them by: a poll's commit, with
-- its children, their messages and the completions they send up the tree,
-- then stays on one node.
--
-- On one PostgreSQL server the column costs its width (16 bytes a row) and
-- nothing else: no index holds it, and the statements that fill it take it
-- from rows they read or lock anyway (the parent's, the polled task's, the
-- recipient's).
--
-- Existing rows are filled here, walking down from the tasks at the top of
-- what exists: a task without a parent is its own root; a task whose parent
-- no longer exists takes that parent's ID as its root, so that its siblings
-- stay in one tree with it; their descendants take theirs.
--
-- Builds of migration 14 run on this schema: the functions, which fill the
-- column, keep their signatures. The one row such a build writes itself, a
-- takeover's history row, has no root: history.root_id allows NULL for it,
-- and a later migration that needs every row's root fills those from their
-- task.
-- compatible-from: 14
--
-- Cost of the upgrade: every row of the three tables is updated, under an
-- exclusive lock: the walk down the trees reads corotask.tasks once per
-- level of the deepest tree, then the messages and the history are joined
-- with it. The trigger that announces ready tasks is held off meanwhile
-- (the rows do not change status).

ALTER TABLE corotask.tasks ADD COLUMN root_id uuid;
ALTER TABLE corotask.messages ADD COLUMN root_id uuid;
ALTER TABLE corotask.history ADD COLUMN root_id uuid;

-- Not a row trigger's call per ready task for an update that changes no
-- task's status.
ALTER TABLE corotask.tasks DISABLE TRIGGER tasks_announce_update;

WITH RECURSIVE tree AS (
    SELECT t.task_id, coalesce(t.parent_id, t.task_id) AS root_id
    FROM corotask.tasks t
    WHERE t.parent_id IS NULL
       OR NOT EXISTS (SELECT 1 FROM corotask.tasks p WHERE p.task_id = t.parent_id)
    UNION ALL
    SELECT c.task_id, tree.root_id
    FROM tree JOIN corotask.tasks c ON c.parent_id = tree.task_id
)
UPDATE corotask.tasks t SET root_id = tree.root_id
FROM tree WHERE t.task_id = tree.task_id;

-- A parent cycle (rows written by hand: create_tasks refuses one) has no
-- top, and the walk never reaches it or the tasks below it: each of them
-- is a root of its own.
UPDATE corotask.tasks SET root_id = task_id WHERE root_id IS NULL;

UPDATE corotask.messages m SET root_id = t.root_id
FROM corotask.tasks t WHERE t.task_id = m.task_id;
-- Messages of a task that no longer exists (none are left by corotask,
-- which deletes them with their task) are roots of their own.
UPDATE corotask.messages SET root_id = task_id WHERE root_id IS NULL;

UPDATE corotask.history h SET root_id = t.root_id
FROM corotask.tasks t WHERE t.task_id = h.task_id;
UPDATE corotask.history SET root_id = task_id WHERE root_id IS NULL;

ALTER TABLE corotask.tasks ENABLE TRIGGER tasks_announce_update;

ALTER TABLE corotask.tasks ALTER COLUMN root_id SET NOT NULL;
ALTER TABLE corotask.messages ALTER COLUMN root_id SET NOT NULL;

COMMENT ON COLUMN corotask.tasks.root_id IS
'The ID of the task at the top of this task''s workflow tree: its own for a task created without a parent, its parent''s root_id for a child.';
COMMENT ON COLUMN corotask.messages.root_id IS
'The recipient''s root_id: a task''s messages live with its tree.';
COMMENT ON COLUMN corotask.history.root_id IS
'The task''s root_id: a task''s history lives with its tree. NULL in a takeover''s row written by a build of migration 14.';
