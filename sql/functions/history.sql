-- The history of tasks (corotask.history): one row per poll that ended, per
-- operator action and per message an operator sent. commit_polls, fail_poll,
-- fail_claimed, release_claims, cancel_task, the operator functions and the
-- claim write their rows in the statement or transaction that changes the
-- task; these are the pieces they share. Every row is the attempt's own
-- (seq 0) but those of the messages operators sent (see operator_record).

-- trim_history keeps a task's first p_keep_first attempts and its last
-- p_keep_last up to p_attempt (the one just recorded), and deletes the polls
-- in between: a range of the primary key, usually one row or none. Operator
-- entries (actions, messages sent) are kept (see operator_record for their
-- own bound).
CREATE OR REPLACE FUNCTION corotask.trim_history(p_task uuid, p_attempt integer, p_keep_first integer, p_keep_last integer)
RETURNS void
-- plpgsql: Citus cannot plan an sql function's statements with parameters.
LANGUAGE plpgsql SET search_path = '' AS $$
BEGIN
    DELETE FROM corotask.history h
    WHERE h.task_id = p_task AND h.attempt > p_keep_first AND h.attempt <= p_attempt - p_keep_last
      AND h.outcome <> 'operator';
END
$$;

-- record_lost records a poll whose claim was lost before it could commit or
-- fail (p_outcome 'claim_lost'), or whose task was canceled while it ran
-- ('canceled'). Nothing else of the task changes: another claim, or the
-- cancellation, owns it now. A row already recorded for that attempt (the
-- takeover of an expired claim records one) is kept.
CREATE OR REPLACE FUNCTION corotask.record_lost(
    p_task       uuid,
    p_attempt    integer,
    p_outcome    text,
    p_executor   uuid,
    p_claimed_at timestamptz,
    p_error      text
) RETURNS void
LANGUAGE plpgsql SET search_path = '' AS $$
BEGIN
    IF p_outcome IS NULL OR p_outcome NOT IN ('claim_lost', 'canceled') THEN
        RAISE EXCEPTION 'corotask: record_lost outcome must be claim_lost or canceled, not %', p_outcome
            USING ERRCODE = '22023';
    END IF;
    INSERT INTO corotask.history (task_id, root_id, attempt, outcome, executor_id, claimed_at, error)
    SELECT p_task, t.root_id, p_attempt, p_outcome, p_executor, p_claimed_at, p_error
    FROM corotask.tasks t WHERE t.task_id = p_task
    ON CONFLICT DO NOTHING;
END
$$;
