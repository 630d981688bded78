-- corotask schema, version 3: the history of every task (one row per poll
-- that ended, and per operator action), the executors that serve tasks, and
-- what a claim records about its holder.

ALTER TABLE corotask.tasks
    -- How many attempts (claims, and operator actions) the task has had: the
    -- number of the current or last one. A claim and an operator action
    -- raise it in the statement that writes the task anyway.
    ADD COLUMN attempts   integer NOT NULL DEFAULT 0,
    -- The executor (corotask.executors.executor_id) that holds the current
    -- claim, and when it claimed the task; the last claim's when no executor
    -- holds it.
    ADD COLUMN claimed_by uuid,
    ADD COLUMN claimed_at timestamptz;

-- One row per attempt that ended: a poll (committed, failed, panicked, its
-- claim lost, canceled, taken over, released) or an operator action. Rows are
-- deleted with their task, and the polls' rows are capped per task: the first
-- and the last few attempts are kept (see the executor's
-- Config.HistoryKeepFirst/Last); operator actions are always kept.
CREATE TABLE corotask.history (
    task_id     uuid        NOT NULL,
    attempt     integer     NOT NULL,
    -- committed, failed, panicked, claim_lost, canceled, taken_over,
    -- released (polls); operator (an operator action, named by action).
    outcome     text        NOT NULL
        CONSTRAINT history_outcome_valid CHECK (outcome IN ('committed', 'failed', 'panicked',
            'claim_lost', 'canceled', 'taken_over', 'released', 'operator')),
    -- The poll's action when committed (yield, sleep, until, suspend, done);
    -- the operator action (cancel, retry, reset, restart, drop_message).
    action      text,
    -- The executor of a poll; the database role of an operator action.
    executor_id uuid,
    actor       text,
    claimed_at  timestamptz,
    finished_at timestamptz NOT NULL DEFAULT now(),
    error       text,
    stack       text,
    popped      integer,
    spawned     integer,
    sent        integer,
    -- The stored size of the state afterwards, in bytes, and, when the type
    -- keeps them, the state itself.
    state_bytes integer,
    state       jsonb,
    -- When the task wants its next poll afterwards (NULL: suspended or ended).
    wake_at     timestamptz,
    -- The message an operator dropped from the inbox (drop_message), kept here.
    message     jsonb,
    PRIMARY KEY (task_id, attempt)
);

-- Retention and the per-task cap delete rows all the time: vacuum early,
-- as for corotask.tasks.
ALTER TABLE corotask.history SET (
    autovacuum_vacuum_scale_factor = 0.05,
    autovacuum_vacuum_insert_scale_factor = 0.1,
    autovacuum_analyze_scale_factor = 0.1
);

COMMENT ON TABLE corotask.history IS
'One row per poll that ended and per operator action, per task; deleted with the task, capped to the first and last attempts.';

-- Executors register themselves while they run: one row each, refreshed
-- about every heartbeat interval, marked stopped (stopped_at, expires_at
-- now) on a graceful stop. A row whose expires_at has passed with no
-- stopped_at belongs to an executor that died or stalled. Rows stay for the
-- executors' retention, so that a task's history can name the host and
-- process of executors that have since stopped.
CREATE TABLE corotask.executors (
    executor_id uuid        PRIMARY KEY,
    host        text        NOT NULL,
    pid         integer     NOT NULL,
    version     text        NOT NULL,
    task_types  text[]      NOT NULL,
    concurrency integer     NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT now(),
    last_seen   timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    stopped_at  timestamptz
);

COMMENT ON TABLE corotask.executors IS
'Executors serving tasks: refreshed while they run, marked stopped when they stop; expired ones (expires_at past, not stopped) died or stalled.';

-- Gain history arguments; replaced by sql/functions/commit.sql and failure.sql.
DROP FUNCTION corotask.commit_polls(uuid[], uuid[], jsonb[], integer[], text[], float8[], timestamptz[], jsonb[], jsonb[]);
DROP FUNCTION corotask.fail_poll(uuid, uuid, text, interval, integer);
