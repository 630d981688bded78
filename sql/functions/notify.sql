-- Executors LISTEN on corotask_ready; the payload is the task type. The
-- functions that leave a task ready (created ready, delivered a message,
-- committed to poll again, released, retried, restarted) announce its type
-- with announce, in the transaction that does it: the NOTIFY is sent when
-- it commits. NOTIFY folds duplicate payloads within a transaction.
--
-- Claims, heartbeats, and commits that end a task or park it (a timer, a
-- suspension) announce nothing: an executor finds a task whose timer comes
-- due by its own next-wake timer. An UPDATE of corotask.tasks written by
-- hand announces nothing either; executors find what it made ready within
-- their PollInterval.
--
-- Announcing from the functions, not from triggers on the table, keeps the
-- NOTIFY where the statement is issued: on a Citus coordinator, not on the
-- worker that holds the row (see docs/scaling.md).

-- is_ready says whether a task whose row holds these values is ready at
-- p_at: no executor holds it, it has not ended, and it is due. The
-- functions ask it of the rows they write, to announce those left ready.
-- IMMUTABLE, the time an argument, and without settings: it is inlined, and
-- Citus takes it in a distributed statement's RETURNING.
CREATE OR REPLACE FUNCTION corotask.is_ready(p_claim uuid, p_done_at timestamptz, p_wake_at timestamptz, p_at timestamptz)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_claim IS NULL AND p_done_at IS NULL AND p_wake_at <= p_at
$$;

-- announce tells the executors listening that tasks of the types p_types
-- (NULLs and repeats ignored) are ready. A call costs about 20 µs even with
-- nothing to announce (its SET clause saves and restores the settings):
-- the functions that run for every poll (commit_polls, deliver_all,
-- release_claims) call it only when they have a type to announce.
CREATE OR REPLACE FUNCTION corotask.announce(p_types text[]) RETURNS void
LANGUAGE plpgsql SET search_path = '' AS $$
BEGIN
    -- plpgsql, not sql: a sql function returning void would stop at the
    -- first row.
    PERFORM pg_catalog.pg_notify('corotask_ready', x.t)
    FROM (SELECT DISTINCT t FROM pg_catalog.unnest(p_types) AS t WHERE t IS NOT NULL) x;
END
$$;
