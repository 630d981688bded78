-- The executor's side of a failed poll: backoff, and the end of a task that
-- failed too many times in a row.

-- fail_poll records a failed poll: nothing of the poll is kept, failures goes
-- up, messages that arrived during the poll join the inbox, and the task sleeps
-- for p_backoff (messages do not wake it sooner: see deliver_all). When
-- p_max_failures > 0 and the task has now failed that many times in a row, it
-- ends as failed and its parent is told. It returns claim_lost when the claim
-- no longer matches (nothing changed), and ended when the task ended.
--
-- p_outcome ('failed' or 'panicked'), p_error and p_stack go to the task's
-- history when p_history is 1 or 2 (2: with the stored state), trimmed as
-- commit_polls does.
CREATE OR REPLACE FUNCTION corotask.fail_poll(
    p_task         uuid,
    p_claim        uuid,
    p_error        text,
    p_backoff      interval,
    p_max_failures integer,
    p_outcome      text,
    p_stack        text,
    p_history      smallint,
    p_keep_first   integer,
    p_keep_last    integer,
    OUT claim_lost boolean,
    OUT ended      boolean
)
LANGUAGE plpgsql SET search_path = '' AS $$
DECLARE
    parent uuid;
    failed corotask.tasks;
    -- Read once, not in the UPDATE's CASEs (see commit_polls).
    v_now timestamptz := corotask.now();
    v_retry_at timestamptz := corotask.now() + p_backoff;
BEGIN
    IF p_outcome IS NULL OR p_outcome NOT IN ('failed', 'panicked') THEN
        RAISE EXCEPTION 'corotask: fail_poll outcome must be failed or panicked, not %', p_outcome
            USING ERRCODE = '22023';
    END IF;
    -- As in commit_polls: the task and, when it may end now, its parent are
    -- locked in task_id order before either is written.
    IF p_max_failures > 0 THEN
        PERFORM corotask.lock_with_parent(p_task);
    END IF;
    UPDATE corotask.tasks SET
        failures = failures + 1,
        -- A panic's stack is kept with its message, for `corotask show`.
        last_error = CASE WHEN coalesce(p_stack, '') = '' THEN p_error
                          ELSE p_error || E'\n\n' || p_stack END,
        inbox_len = inbox_len + inbox_next_len,
        inbox_next_len = 0,
        next_wakes = false,
        heartbeat = NULL,
        claim = NULL,
        claim_expires_at = NULL,
        -- The failed poll's reasons stand (nothing of it was kept), with
        -- what arrived during it, retry and the backoff's timer.
        woke = ((woke >> 8) | woke | 16 | 8) & 127,
        wake_at = CASE WHEN p_max_failures > 0 AND failures + 1 >= p_max_failures
                       THEN NULL ELSE v_retry_at END,
        done_at = CASE WHEN p_max_failures > 0 AND failures + 1 >= p_max_failures THEN v_now END,
        outcome = CASE WHEN p_max_failures > 0 AND failures + 1 >= p_max_failures THEN 'failed' END
    WHERE task_id = p_task AND claim = p_claim
    RETURNING * INTO failed;
    claim_lost := NOT FOUND;
    parent := failed.parent_id;
    ended := coalesce(failed.outcome IS NOT NULL, false);
    -- A backoff of zero leaves it ready now.
    IF NOT claim_lost AND corotask.is_ready(failed.claim, failed.done_at, failed.wake_at, v_now) THEN
        PERFORM corotask.announce(ARRAY[failed.task_type]);
    END IF;
    IF NOT claim_lost AND p_history > 0 THEN
        INSERT INTO corotask.history (task_id, root_id, attempt, outcome, executor_id, claimed_at, error, stack,
            state_bytes, state, wake_at)
        VALUES (p_task, failed.root_id, failed.attempts, p_outcome, failed.claimed_by, failed.claimed_at, p_error, p_stack,
            coalesce(pg_column_size(failed.inner_state), 0), CASE WHEN p_history = 2 THEN failed.inner_state END, failed.wake_at)
        ON CONFLICT DO NOTHING;
        PERFORM corotask.trim_history(p_task, failed.attempts, p_keep_first, p_keep_last);
    END IF;
    IF ended AND parent IS NOT NULL THEN
        PERFORM corotask.deliver_all(ARRAY[parent], ARRAY[corotask.completion(p_task, 'failed', NULL, p_error)],
            ARRAY[failed.root_id]);
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
    n integer;
    holder uuid;
    since timestamptz;
    root uuid;
    -- Read once: corotask.now() is a COALESCE once inlined, which Citus
    -- refuses in a distributed UPDATE (see commit_polls).
    v_now timestamptz := corotask.now();
BEGIN
    PERFORM corotask.lock_with_parent(p_task);
    UPDATE corotask.tasks SET
        inbox_len = inbox_len + inbox_next_len,
        inbox_next_len = 0,
        next_wakes = false,
        heartbeat = NULL,
        claim = NULL,
        claim_expires_at = NULL,
        wake_at = NULL,
        done_at = v_now,
        outcome = 'failed'
    WHERE task_id = p_task AND claim = p_claim
    RETURNING parent_id, last_error, attempts, claimed_by, claimed_at, root_id INTO parent, err, n, holder, since, root;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO corotask.history (task_id, root_id, attempt, outcome, executor_id, claimed_at, error)
    VALUES (p_task, root, n, 'failed', holder, since, 'failed for good without a poll: ' || coalesce(err, 'too many failures'))
    ON CONFLICT DO NOTHING;
    IF parent IS NOT NULL THEN
        PERFORM corotask.deliver_all(ARRAY[parent], ARRAY[corotask.completion(p_task, 'failed', NULL, err)], ARRAY[root]);
    END IF;
    RETURN true;
END
$$;
