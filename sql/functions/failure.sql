-- The executor's side of a failed poll: backoff, and the end of a task that
-- failed too many times in a row.

-- fail_poll records a failed poll: nothing of the poll is kept, failures goes
-- up, messages that arrived during the poll join the inbox, and the task sleeps
-- for p_backoff (messages do not wake it sooner: see deliver_all). When
-- p_max_failures > 0 and the task has now failed that many times in a row, it
-- ends as failed and its parent is told. It returns claim_lost when the claim
-- no longer matches (nothing changed), and ended when the task ended.
CREATE OR REPLACE FUNCTION corotask.fail_poll(
    p_task         uuid,
    p_claim        uuid,
    p_error        text,
    p_backoff      interval,
    p_max_failures integer,
    OUT claim_lost boolean,
    OUT ended      boolean
)
LANGUAGE plpgsql SET search_path = '' AS $$
DECLARE
    parent uuid;
BEGIN
    -- As in commit_polls: the task and, when it may end now, its parent are
    -- locked in task_id order before either is written.
    IF p_max_failures > 0 THEN
        PERFORM 1 FROM corotask.tasks t
        WHERE t.task_id IN (p_task, (SELECT p.parent_id FROM corotask.tasks p WHERE p.task_id = p_task))
        ORDER BY t.task_id
        FOR UPDATE;
    END IF;
    UPDATE corotask.tasks SET
        failures = failures + 1,
        last_error = p_error,
        inbox = inbox || inbox_next,
        inbox_next = '{}',
        heartbeat = NULL,
        claim = NULL,
        claim_expires_at = NULL,
        wake_at = CASE WHEN p_max_failures > 0 AND failures + 1 >= p_max_failures
                       THEN NULL ELSE now() + p_backoff END,
        done_at = CASE WHEN p_max_failures > 0 AND failures + 1 >= p_max_failures THEN now() END,
        outcome = CASE WHEN p_max_failures > 0 AND failures + 1 >= p_max_failures THEN 'failed' END
    WHERE task_id = p_task AND claim = p_claim
    RETURNING parent_id, outcome IS NOT NULL INTO parent, ended;
    claim_lost := NOT FOUND;
    ended := coalesce(ended, false);
    IF ended AND parent IS NOT NULL THEN
        PERFORM corotask.deliver_all(ARRAY[parent], ARRAY[corotask.completion(p_task, 'failed', NULL, p_error)]);
    END IF;
END
$$;

-- fail_claimed ends a claimed task as failed without counting another
-- failure (its failures already reached its type's limit: a claim taken over
-- from an executor that stopped renewing it counts one), and tells its
-- parent. It returns false when the claim no longer matches.
CREATE OR REPLACE FUNCTION corotask.fail_claimed(p_task uuid, p_claim uuid) RETURNS boolean
LANGUAGE plpgsql SET search_path = '' AS $$
DECLARE
    parent uuid;
    err text;
BEGIN
    PERFORM 1 FROM corotask.tasks t
    WHERE t.task_id IN (p_task, (SELECT p.parent_id FROM corotask.tasks p WHERE p.task_id = p_task))
    ORDER BY t.task_id
    FOR UPDATE;
    UPDATE corotask.tasks SET
        inbox = inbox || inbox_next,
        inbox_next = '{}',
        heartbeat = NULL,
        claim = NULL,
        claim_expires_at = NULL,
        wake_at = NULL,
        done_at = now(),
        outcome = 'failed'
    WHERE task_id = p_task AND claim = p_claim
    RETURNING parent_id, last_error INTO parent, err;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF parent IS NOT NULL THEN
        PERFORM corotask.deliver_all(ARRAY[parent], ARRAY[corotask.completion(p_task, 'failed', NULL, err)]);
    END IF;
    RETURN true;
END
$$;
