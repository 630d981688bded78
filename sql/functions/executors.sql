-- Executors register themselves in corotask.executors while they run.

-- executor_seen inserts or refreshes an executor's row: it expires at
-- p_expires_in from now unless refreshed again. Rows that expired over an
-- hour ago (executors that died) are deleted on the way; those that expired
-- more recently are kept so that an operator can see what died.
CREATE OR REPLACE FUNCTION corotask.executor_seen(
    p_executor    uuid,
    p_host        text,
    p_pid         integer,
    p_version     text,
    p_types       text[],
    p_concurrency integer,
    p_expires_in  interval
) RETURNS void
LANGUAGE sql SET search_path = '' AS $$
    WITH gone AS (
        DELETE FROM corotask.executors WHERE expires_at < now() - interval '1 hour'
    )
    INSERT INTO corotask.executors AS e (executor_id, host, pid, version, task_types, concurrency, expires_at)
    VALUES (p_executor, p_host, p_pid, p_version, p_types, p_concurrency, now() + p_expires_in)
    ON CONFLICT (executor_id) DO UPDATE SET last_seen = now(), expires_at = excluded.expires_at
$$;

-- executor_serves reports whether a live executor (one whose row has not
-- expired) serves tasks of type p_type.
CREATE OR REPLACE FUNCTION corotask.executor_serves(p_type text) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE SET search_path = '' AS $$
    SELECT EXISTS (SELECT 1 FROM corotask.executors e
                   WHERE e.expires_at > now() AND p_type = ANY (e.task_types))
$$;
