-- corotask schema, version 2: "not running" is "claim IS NULL" (heartbeat is
-- NULL then too), and a claim carries its own expiry, set by the executor that
-- holds it. The functions live in sql/functions from this version on; this
-- file drops those whose signature changes or that are gone.

-- The triggers and indexes below test "not running"; they are re-made once
-- the rows are converted.
DROP TRIGGER tasks_announce_update ON corotask.tasks;
DROP TRIGGER tasks_announce_insert ON corotask.tasks;
DROP INDEX corotask.tasks_ready_idx;
DROP INDEX corotask.tasks_running_idx;

ALTER TABLE corotask.tasks
    ALTER COLUMN heartbeat DROP NOT NULL,
    ALTER COLUMN heartbeat DROP DEFAULT,
    -- When the current claim expires unless renewed: now() plus the
    -- HeartbeatTimeout of the executor that holds it, at each claim and
    -- renewal. NULL when no executor holds the task.
    ADD COLUMN claim_expires_at timestamptz;

COMMENT ON COLUMN corotask.tasks.heartbeat IS
'Last renewal of the current claim; NULL when no executor holds the task (claim IS NULL).';

-- Claims taken by the previous version expire as they would have for an
-- executor with the default HeartbeatTimeout (30s).
UPDATE corotask.tasks SET
    heartbeat = CASE WHEN claim IS NULL THEN NULL ELSE heartbeat END,
    claim_expires_at = CASE WHEN claim IS NULL THEN NULL ELSE heartbeat + interval '30 seconds' END
WHERE claim IS NOT NULL OR heartbeat IS NOT NULL;

-- Claim of ready tasks: only live, unclaimed, non-suspended tasks are indexed,
-- so the claim does not slow down with the number of running, suspended or ended tasks.
CREATE INDEX tasks_ready_idx ON corotask.tasks (wake_at) INCLUDE (task_type)
    WHERE claim IS NULL AND done_at IS NULL AND wake_at IS NOT NULL;
-- Claim of tasks whose executor stopped renewing its claim.
CREATE INDEX tasks_running_idx ON corotask.tasks (claim_expires_at)
    WHERE claim IS NOT NULL;

-- The functions of sql/functions/notify.sql; they are replaced by those
-- files right after the migrations.
CREATE TRIGGER tasks_announce_insert AFTER INSERT ON corotask.tasks
    REFERENCING NEW TABLE AS created
    FOR EACH STATEMENT EXECUTE FUNCTION corotask.announce_created();
CREATE TRIGGER tasks_announce_update AFTER UPDATE ON corotask.tasks
    FOR EACH ROW
    WHEN (NEW.claim IS NULL AND NEW.done_at IS NULL AND NEW.wake_at <= now())
    EXECUTE FUNCTION corotask.announce_ready();

-- Replaced by deliver_all.
DROP FUNCTION corotask.deliver(uuid, jsonb);
-- Gains a delay.
DROP FUNCTION corotask.release_claims(uuid[], uuid[]);
