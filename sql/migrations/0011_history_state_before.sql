-- corotask schema, version 11: an operator may set a live task's state
-- (corotask.set_task_state); its history row keeps the state it replaced,
-- beside the new one (in state), so that the edit can be read, and undone.
-- compatible-from: 9
--
-- Older builds read and write the history by naming its columns: they leave
-- the new one alone.
--
-- Cost of the upgrade: adding a column without a default rewrites nothing.

ALTER TABLE corotask.history ADD COLUMN state_before jsonb;

COMMENT ON COLUMN corotask.history.state_before IS
'The state an operator replaced (action set_state); the state set is in state. NULL for every other entry.';
