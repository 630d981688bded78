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
    notified integer;
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
        WITH RECURSIVE tree AS (
            SELECT t.task_id, t.claim FROM corotask.tasks t WHERE t.task_id = p_task AND t.root_id = root.root_id
            UNION
            SELECT c.task_id, c.claim FROM corotask.tasks c JOIN tree ON c.parent_id = tree.task_id
            WHERE c.root_id = root.root_id
        ), canceled AS (
            UPDATE corotask.tasks t SET done_at = now_at, outcome = 'canceled', wake_at = NULL,
                heartbeat = NULL, claim = NULL, claim_expires_at = NULL, attempts = t.attempts + 1,
                inbox_len = t.inbox_len + t.inbox_next_len, inbox_next_len = 0, next_wakes = false
            FROM tree
            WHERE t.task_id = tree.task_id AND t.root_id = root.root_id AND t.done_at IS NULL
            RETURNING t.task_id, t.root_id, t.attempts, tree.claim AS old_claim
        ), recorded AS (
            INSERT INTO corotask.history (task_id, root_id, attempt, outcome, action, actor, error)
            SELECT task_id, root_id, attempts, 'operator', 'cancel', session_user, 'ancestor ' || p_task || ' canceled'
            FROM canceled
            ON CONFLICT DO NOTHING
        )
        SELECT count(*),
               count(pg_notify('corotask_cancel', task_id::text)) FILTER (WHERE old_claim IS NOT NULL)
        INTO n, notified FROM canceled;
        EXIT WHEN n = 0;
        total := total + n;
    END LOOP;
    IF root.parent_id IS NOT NULL THEN
        PERFORM corotask.deliver_all(ARRAY[root.parent_id],
            ARRAY[corotask.completion(p_task, 'canceled', NULL, NULL)]);
    END IF;
    RETURN total;
END
$$;

REVOKE EXECUTE ON FUNCTION corotask.cancel_task(uuid) FROM PUBLIC;
