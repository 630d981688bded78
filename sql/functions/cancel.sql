-- The end of a task from outside: cancel_task, and the completion message a
-- parent receives when a child ends (however it ends).

-- completion builds the one message a parent receives when its child ends.
CREATE OR REPLACE FUNCTION corotask.completion(p_child uuid, p_outcome text, p_result jsonb, p_error text)
RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('from', p_child, 'body', p_result, 'done', true, 'at', now())
        || CASE p_outcome
               WHEN 'failed' THEN jsonb_build_object('err', coalesce(p_error, 'failed'))
               WHEN 'canceled' THEN jsonb_build_object('err', 'canceled')
               ELSE '{}'::jsonb
           END
$$;

-- cancel_task cancels a task and all its live descendants, and returns how many
-- tasks it canceled. The canceled task's parent, if alive, gets one completion
-- message; running polls of canceled tasks are told through NOTIFY corotask_cancel.
-- Each canceled task's history records the cancellation and the database role
-- of the session that asked for it (session_user: inside this function,
-- current_user is the schema's owner).
-- It runs with the rights of the schema's owner, as create_task does; EXECUTE
-- is revoked from PUBLIC.
CREATE OR REPLACE FUNCTION corotask.cancel_task(p_task uuid) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = '' AS $$
DECLARE
    root corotask.tasks;
    -- The time, read once: Citus refuses corotask.now() (a COALESCE) in a
    -- distributed UPDATE, and takes a parameter.
    now_at timestamptz := corotask.now();
    n integer;
    ids uuid[];      -- the tasks a pass canceled ...
    attempt_nos integer[]; -- ... their attempt numbers ...
    running uuid[];  -- ... and those an executor held
    total integer := 0;
BEGIN
    IF p_task IS NULL THEN
        RAISE EXCEPTION 'corotask: cancel_task needs a task id' USING ERRCODE = '22004';
    END IF;
    -- Its parent is told of its end.
    PERFORM corotask.lock_with_parent(p_task);
    SELECT * INTO root FROM corotask.tasks WHERE task_id = p_task;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'corotask: task % not found', p_task
            USING ERRCODE = 'CT404', DETAIL = 'task ' || p_task;
    END IF;
    IF root.done_at IS NOT NULL THEN
        RAISE EXCEPTION 'corotask: task % has ended', p_task
            USING ERRCODE = 'CT410', DETAIL = 'task ' || p_task;
    END IF;
    PERFORM pg_notify('corotask_cancel', p_task::text) WHERE root.claim IS NOT NULL;
    UPDATE corotask.tasks SET done_at = now_at, outcome = 'canceled', wake_at = NULL,
        heartbeat = NULL, claim = NULL, claim_expires_at = NULL, attempts = attempts + 1,
        -- Messages that arrived during a poll join the inbox, as at any release.
        inbox_len = inbox_len + inbox_next_len, inbox_next_len = 0, next_wakes = false
    WHERE task_id = p_task AND root_id = root.root_id;
    INSERT INTO corotask.history (task_id, root_id, attempt, outcome, action, actor)
    VALUES (p_task, root.root_id, root.attempts + 1, 'operator', 'cancel', session_user)
    ON CONFLICT DO NOTHING;
    total := 1;
    -- Each pass is a new statement with a new snapshot, so children added by a poll
    -- that committed while we waited for a lock are found by the next pass.
    -- Ended tasks are walked through too: retention keeps a task's record while
    -- it has children, so every live descendant is reached. Every statement
    -- names the tree's root: its descendants share it (and on a database
    -- distributed by root, Citus runs a recursive query only with it).
    LOOP
        -- Built with the root and the time as values (format's %L quotes
        -- them): Citus runs a recursive query only with its filter on the
        -- distribution column a constant, not a parameter.
        EXECUTE format($walk$
            WITH RECURSIVE tree AS (
                SELECT t.task_id, t.claim FROM corotask.tasks t WHERE t.task_id = %1$L AND t.root_id = %2$L
                UNION
                SELECT c.task_id, c.claim FROM corotask.tasks c JOIN tree ON c.parent_id = tree.task_id
                WHERE c.root_id = %2$L
            ), canceled AS (
                UPDATE corotask.tasks t SET done_at = %3$L, outcome = 'canceled', wake_at = NULL,
                    heartbeat = NULL, claim = NULL, claim_expires_at = NULL, attempts = t.attempts + 1,
                    inbox_len = t.inbox_len + t.inbox_next_len, inbox_next_len = 0, next_wakes = false
                FROM tree
                WHERE t.task_id = tree.task_id AND t.root_id = %2$L AND t.done_at IS NULL
                RETURNING t.task_id, t.root_id, t.attempts, tree.claim AS old_claim
            )
            SELECT count(*), array_agg(task_id), array_agg(attempts),
                   array_agg(task_id) FILTER (WHERE old_claim IS NOT NULL)
            FROM canceled
            $walk$, p_task, root.root_id, now_at)
        INTO n, ids, attempt_nos, running;
        -- Each canceled task's history records it (a statement of its own:
        -- Citus plans no recursive query beside an INSERT).
        INSERT INTO corotask.history (task_id, root_id, attempt, outcome, action, actor, error)
        SELECT u.id, root.root_id, u.a, 'operator', 'cancel', session_user, 'ancestor ' || p_task || ' canceled'
        FROM unnest(ids, attempt_nos) AS u(id, a)
        ON CONFLICT DO NOTHING;
        -- Running polls of canceled tasks are told (NOTIFY from here: on
        -- Citus, where this function runs, not from a worker).
        PERFORM pg_notify('corotask_cancel', x::text) FROM unnest(running) AS x;
        EXIT WHEN n = 0;
        total := total + n;
    END LOOP;
    IF root.parent_id IS NOT NULL THEN
        PERFORM corotask.deliver_all(ARRAY[root.parent_id],
            ARRAY[corotask.completion(p_task, 'canceled', NULL, NULL)], ARRAY[root.root_id]);
    END IF;
    RETURN total;
END
$$;

REVOKE EXECUTE ON FUNCTION corotask.cancel_task(uuid) FROM PUBLIC;
