-- corotask schema, version 14: flow control. Priorities, fleet-wide
-- concurrency per type, concurrency per key, rate limits and pause, all
-- stored here so that every executor and every operator agrees on them.
--
-- tasks.priority orders claims: higher first, then the oldest wake_at. 0 is
-- the default and the lowest; the ready tasks of a higher priority have an
-- index of their own (tasks_ready_priority_idx), so that types whose tasks
-- all have priority 0 search as before.
--
-- corotask.type_controls holds, per task type, what limits its claims: a
-- pause (executors claim none of it; running polls finish), a fleet-wide
-- maximum of running polls, the key space whose per-key limit its tasks
-- count in (tasks.limit_key is a task's key in it), and the rate limit its
-- poll starts take from. A type without a row has none of these, and its
-- claims read one index entry more than before. corotask.key_limits holds
-- each key space's maximum of running tasks per key, corotask.rate_limits
-- each named rate limit and its bucket.
--
-- A claim locks the rows of its limited types before it counts (see
-- internal/query's ClaimControls), so two executors never both take the
-- last slot. tasks.counted marks the running claims that count toward
-- their type's maximum (set by the claim; an ended poll releases it with
-- its claim, an expired claim stops counting), so counting reads at most
-- the type's maximum of index entries.
--
-- corotask.control_history records every change of a control: who paused a
-- type, when, what limit was set.
--
-- Builds of earlier migrations would claim past the limits and the pause
-- they do not read: they refuse to run on this schema.
-- compatible-from: 14
--
-- Cost of the upgrade: two columns with constant defaults and one without
-- (nothing rewritten), three indexes that hold no row until tasks use them
-- (their build reads the table once), and four empty tables.

ALTER TABLE corotask.tasks
    ADD COLUMN priority smallint NOT NULL DEFAULT 0 CONSTRAINT tasks_priority_check CHECK (priority >= 0),
    ADD COLUMN limit_key text,
    ADD COLUMN counted boolean NOT NULL DEFAULT false;

COMMENT ON COLUMN corotask.tasks.priority IS
'Claim order: higher first, then the oldest wake_at (0, the default, is the lowest).';
COMMENT ON COLUMN corotask.tasks.limit_key IS
'The task''s key in the key space of its type (type_controls.key_space): at most key_limits.max_running tasks per key run at once.';
COMMENT ON COLUMN corotask.tasks.counted IS
'Whether the running claim counts toward the type''s fleet-wide maximum (type_controls.max_running); set by the claim.';

CREATE INDEX tasks_ready_priority_idx ON corotask.tasks (task_type, priority DESC, wake_at)
    WHERE claim IS NULL AND done_at IS NULL AND wake_at IS NOT NULL AND priority > 0;
CREATE INDEX tasks_running_counted_idx ON corotask.tasks (task_type)
    WHERE claim IS NOT NULL AND counted;
CREATE INDEX tasks_running_limit_key_idx ON corotask.tasks (limit_key)
    WHERE claim IS NOT NULL AND limit_key IS NOT NULL;

CREATE TABLE corotask.key_limits (
    key_space   text PRIMARY KEY,
    max_running integer NOT NULL CHECK (max_running > 0)
);

CREATE TABLE corotask.rate_limits (
    name        text PRIMARY KEY,
    rate        integer NOT NULL CHECK (rate > 0),
    per         interval NOT NULL CHECK (per > '0'),
    -- The bucket: tokens left at refilled_at; it refills at rate per per,
    -- up to rate.
    tokens      float8 NOT NULL,
    refilled_at timestamptz NOT NULL
);

CREATE TABLE corotask.type_controls (
    task_type   text PRIMARY KEY,
    max_running integer CHECK (max_running > 0),
    key_space   text,
    rate_limit  text,
    paused_at   timestamptz,
    paused_by   text
);

CREATE TABLE corotask.control_history (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at      timestamptz NOT NULL DEFAULT now(),
    action  text NOT NULL,
    subject text NOT NULL,
    detail  text,
    by_role text NOT NULL DEFAULT current_user
);

COMMENT ON TABLE corotask.type_controls IS
'Per task type: pause, fleet-wide maximum of running polls, key space, rate limit. See tasks.Pause, tasks.SetMaxRunning.';
COMMENT ON TABLE corotask.key_limits IS
'Per key space: the maximum of running tasks per key. See tasks.SetKeyLimit.';
COMMENT ON TABLE corotask.rate_limits IS
'Named rate limits: at most rate takes per per, fleet-wide. See tasks.SetRateLimit.';
COMMENT ON TABLE corotask.control_history IS
'Every change of a control (pause, resume, limits), with who made it.';

-- Every role that may use the schema reads the controls (stats, the UI,
-- status); a claim locks the rows of its limited types and takes tokens,
-- which takes UPDATE: the roles that update the tasks (executors) get it,
-- as the migration of the messages did.
GRANT SELECT ON corotask.type_controls, corotask.key_limits, corotask.rate_limits, corotask.control_history TO PUBLIC;
DO $$
DECLARE
    g record;
BEGIN
    FOR g IN
        SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(r.rolname) END AS grantee
        FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) AS a
        LEFT JOIN pg_roles r ON r.oid = a.grantee
        WHERE c.oid = 'corotask.tasks'::regclass AND a.grantee <> c.relowner AND a.privilege_type = 'UPDATE'
    LOOP
        EXECUTE format('GRANT UPDATE ON corotask.type_controls, corotask.key_limits, corotask.rate_limits TO %s', g.grantee);
    END LOOP;
END
$$;
