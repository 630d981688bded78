-- Executors register themselves in corotask.executors while they run.

-- executor_seen inserts or refreshes an executor's row: it expires at
-- p_expires_in from now unless refreshed again. Rows that expired more than
-- p_keep ago (executors that stopped or died; NULL keeps them) are deleted
-- on the way: until then a task's history can name their host and process.
CREATE OR REPLACE FUNCTION corotask.executor_seen(
    p_executor    uuid,
    p_host        text,
    p_pid         integer,
    p_version     text,
    p_types       text[],
    p_concurrency integer,
    p_expires_in  interval,
    p_keep        interval
) RETURNS void
-- plpgsql, not sql: Citus cannot plan an sql function's statements with
-- parameters on its reference table ("could not create distributed plan").
LANGUAGE plpgsql SET search_path = '' AS $$
BEGIN
    DELETE FROM corotask.executors WHERE expires_at < now() - p_keep;
    -- The update takes the times from the row offered (excluded): Citus
    -- refuses now() in an upsert's SET.
    INSERT INTO corotask.executors AS e (executor_id, host, pid, version, task_types, concurrency, last_seen, expires_at)
    VALUES (p_executor, p_host, p_pid, p_version, p_types, p_concurrency, now(), now() + p_expires_in)
    ON CONFLICT (executor_id) DO UPDATE SET last_seen = excluded.last_seen, expires_at = excluded.expires_at, stopped_at = NULL;
END
$$;

-- executor_stopped marks an executor stopped, at the end of its graceful
-- stop: it no longer serves its types.
CREATE OR REPLACE FUNCTION corotask.executor_stopped(p_executor uuid) RETURNS void
LANGUAGE plpgsql SET search_path = '' AS $$
BEGIN
    UPDATE corotask.executors SET stopped_at = now(), expires_at = now(), last_seen = now()
    WHERE executor_id = p_executor;
END
$$;
