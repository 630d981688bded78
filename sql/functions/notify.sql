-- Executors LISTEN on corotask_ready; the payload is the task type. Triggers
-- (see the migrations) announce every insert or update that leaves a task
-- ready, whoever made it. Inserts are announced once per statement (bulk
-- creation); updates per row, but only rows that are ready afterwards (the
-- trigger's WHEN), so that claims, heartbeats and commits that end or park a
-- task cost nothing here. NOTIFY folds duplicate payloads within a transaction.

CREATE OR REPLACE FUNCTION corotask.announce_created() RETURNS trigger
LANGUAGE plpgsql SET search_path = '' AS $$
BEGIN
    PERFORM pg_notify('corotask_ready', s.task_type)
    FROM (SELECT DISTINCT c.task_type FROM created c
          WHERE c.wake_at <= corotask.now() AND c.claim IS NULL AND c.done_at IS NULL) s;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION corotask.announce_ready() RETURNS trigger
LANGUAGE plpgsql SET search_path = '' AS $$
BEGIN
    PERFORM pg_notify('corotask_ready', NEW.task_type);
    RETURN NULL;
END
$$;
