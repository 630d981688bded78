-- Distributes a migrated corotask schema over a Citus cluster, once:
-- sql.Distribute runs it (`corotask migrate --citus`), on the coordinator,
-- in the database that `corotask migrate` made ready (schema version 16 or
-- later), after the database exists on every node with the citus extension
-- and the nodes are registered in it (what scripts/citus/cluster.sh start
-- and createdb do). sql.Distribute then makes the executor's claim
-- function (see internal/query/citus.go), which this file does not.
--
-- What it does, in one transaction:
--   - corotask.tasks, corotask.messages and corotask.history are
--     distributed by root_id, colocated: a workflow tree, its messages and
--     its history live on one shard. Citus needs every unique index to hold
--     the distribution column, so each primary key gains root_id (after the
--     ID it had: lookups by ID still use it), and history rows written by a
--     build of migration 14 get their task's root first.
--   - The unique index of live keys (task_type, task_key) cannot hold
--     root_id without losing its meaning (one live task per key across all
--     trees): it is dropped, and keys are not unique on Citus.
--   - The small tables every executor reads (executors, type_controls,
--     key_limits, rate_limits, key_windows, control_history) become
--     reference tables, copied to every node.
--
-- Run twice, it finds the tables distributed and changes nothing. It is
-- plain SQL (no psql commands).

BEGIN;

DO $$
DECLARE
    v integer;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RAISE EXCEPTION 'corotask: database % has no citus extension: create it on every node first (scripts/citus/cluster.sh createdb)',
            current_database();
    END IF;
    IF to_regclass('corotask.migrations') IS NULL THEN
        RAISE EXCEPTION 'corotask: database % has no corotask schema: run corotask migrate against it first', current_database();
    END IF;
    SELECT max(version) INTO v FROM corotask.migrations;
    IF v < 16 THEN
        RAISE EXCEPTION 'corotask: the schema is at version %, and distribution needs 16 or later (tasks.root_id, no triggers): run corotask migrate with this build first', v;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'corotask.tasks'::regclass) THEN
        RAISE NOTICE 'corotask: the tables are distributed already; nothing to do';
        RETURN;
    END IF;

    -- Citus' own notices (data copied to shards) are not shown.
    PERFORM set_config('client_min_messages', 'warning', true);
    UPDATE corotask.history h SET root_id = t.root_id
    FROM corotask.tasks t WHERE h.root_id IS NULL AND t.task_id = h.task_id;
    UPDATE corotask.history SET root_id = task_id WHERE root_id IS NULL;
    ALTER TABLE corotask.history ALTER COLUMN root_id SET NOT NULL;

    ALTER TABLE corotask.tasks DROP CONSTRAINT tasks_pkey, ADD PRIMARY KEY (task_id, root_id);
    ALTER TABLE corotask.messages DROP CONSTRAINT messages_pkey, ADD PRIMARY KEY (task_id, root_id, seq);
    ALTER TABLE corotask.history DROP CONSTRAINT history_pkey, ADD PRIMARY KEY (task_id, root_id, attempt, seq);
    DROP INDEX corotask.tasks_live_key;

    PERFORM create_distributed_table('corotask.tasks', 'root_id');
    PERFORM create_distributed_table('corotask.messages', 'root_id', colocate_with => 'corotask.tasks');
    PERFORM create_distributed_table('corotask.history', 'root_id', colocate_with => 'corotask.tasks');

    PERFORM create_reference_table(t::regclass)
    FROM unnest(ARRAY['corotask.executors', 'corotask.type_controls', 'corotask.key_limits', 'corotask.rate_limits',
                      'corotask.key_windows', 'corotask.control_history']) AS t;
    PERFORM set_config('client_min_messages', 'notice', true);
    RAISE NOTICE 'corotask: tasks, messages and history distributed by root_id; six reference tables';
END
$$;

COMMIT;
