-- corotask schema, version 4: the index of ready tasks is keyed by type
-- first, so that a claim reads only the types it polls. Keyed by wake_at
-- alone, a claim walked the ready tasks of every type in wake_at order and
-- skipped those of types it does not poll: a backlog of a type no executor
-- polls made every claim slower.
DROP INDEX corotask.tasks_ready_idx;
CREATE INDEX tasks_ready_idx ON corotask.tasks (task_type, wake_at)
    WHERE claim IS NULL AND done_at IS NULL AND wake_at IS NOT NULL;
