-- Operator actions on one task: retry it now, reset its failures, restart
-- it after it failed, drop a message from its inbox, set its state. Each locks the task's
-- row, refuses a task an executor holds (a running poll would commit over
-- the change, or count inbox positions that moved), raises the task's
-- attempt number and records the action in its history with the database
-- role of the session that asked for it (session_user: inside these
-- functions current_user is the schema's owner). A claim skips a locked row,
-- so a claim and an action never wait for each other for long.
--
-- A message an operator sends (operator_send) is recorded too, but is no
-- attempt: it goes to a running task as to any other (into inbox_next), so
-- it leaves the attempt number alone and is recorded under the task's
-- current attempt with the next sequence number (seq) of that attempt.
--
-- They run with the rights of the schema's owner, as cancel_task does;
-- EXECUTE is revoked from PUBLIC. Besides CT404 and CT410, they raise CT409
-- (an executor holds the task), CT422 (the task's status does not allow the
-- action; HINT says why) and CT416 (no message at that position, or not the
-- one named);
-- operator_send raises CT413 (message too large) as send_to_task does.

-- operator_lock locks and returns a live task that no executor holds, or
-- raises CT404, CT410 or CT409. p_what names the action for the error.
CREATE OR REPLACE FUNCTION corotask.operator_lock(p_task uuid, p_what text, p_ended_ok boolean DEFAULT false)
RETURNS corotask.tasks
LANGUAGE plpgsql SET search_path = '' AS $$
DECLARE
    t corotask.tasks;
    root uuid;
BEGIN
    IF p_task IS NULL THEN
        RAISE EXCEPTION 'corotask: % needs a task id', p_what USING ERRCODE = '22004';
    END IF;
    -- The lock names the task's root: on a database distributed by root
    -- (Citus), a row lock by ID alone would span every shard.
    SELECT root_id INTO root FROM corotask.tasks WHERE task_id = p_task;
    SELECT * INTO t FROM corotask.tasks WHERE task_id = p_task AND root_id = root FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'corotask: task % not found', p_task
            USING ERRCODE = 'CT404', DETAIL = 'task ' || p_task;
    END IF;
    IF t.done_at IS NOT NULL AND NOT p_ended_ok THEN
        RAISE EXCEPTION 'corotask: task % has ended', p_task
            USING ERRCODE = 'CT410', DETAIL = 'task ' || p_task;
    END IF;
    IF t.claim IS NOT NULL THEN
        RAISE EXCEPTION 'corotask: task % is running', p_task
            USING ERRCODE = 'CT409', DETAIL = 'task ' || p_task,
                  HINT = 'an executor holds it: try again once its poll has ended';
    END IF;
    RETURN t;
END
$$;

-- operator_record records an operator action in the task's history, at
-- the task's attempt number. An action that raised it (every one but 'send')
-- has that attempt's own row (seq 0); a send, which did not, takes the next
-- sequence number of that attempt (from 1): the caller holds the task's row
-- locked, so no other send of the task takes the same one meanwhile, and a
-- poll of that attempt writes seq 0.
--
-- The polls' trim (trim_history) keeps operator entries; so that a script
-- that acts on a task, or sends it messages, in a loop does not grow its
-- history without bound, a task keeps its last 100 operator entries, and
-- the actions (not the messages sent) among its first 20 attempts. Operator
-- entries are rare: the count is an index range scan of one task.
--
-- p_state and p_state_before are the states of set_state: the one set, and
-- the one it replaced; the other actions call the form without them, below.
CREATE OR REPLACE FUNCTION corotask.operator_record(t corotask.tasks, p_action text, p_message jsonb,
    p_state jsonb, p_state_before jsonb)
RETURNS void
-- plpgsql: Citus cannot plan the statements of a LANGUAGE sql function
-- with parameters on a distributed table.
LANGUAGE plpgsql SET search_path = '' AS $$
DECLARE
    seq integer := 0;
    oldest record; -- the oldest operator entry of the last 100 kept
BEGIN
    IF p_action = 'send' THEN
        SELECT 1 + coalesce(max(h.seq), 0) INTO seq FROM corotask.history h
        WHERE h.task_id = t.task_id AND h.root_id = t.root_id AND h.attempt = t.attempts;
    END IF;
    INSERT INTO corotask.history (task_id, root_id, attempt, seq, outcome, action, actor, wake_at, message, state_bytes,
                                  state, state_before)
    VALUES (t.task_id, t.root_id, t.attempts, seq, 'operator', p_action, session_user, t.wake_at, p_message,
            coalesce(pg_column_size(t.inner_state), 0), p_state, p_state_before)
    ON CONFLICT DO NOTHING;
    -- A task the action leaves ready is announced: the action made it ready
    -- (retry, restart), or held its row locked, so that a claim may have
    -- skipped it meanwhile.
    IF corotask.is_ready(t.claim, t.done_at, t.wake_at, corotask.now()) THEN
        PERFORM corotask.announce(ARRAY[t.task_type]);
    END IF;
    SELECT o.attempt, o.seq INTO oldest FROM (
        SELECT h.attempt, h.seq FROM corotask.history h
        WHERE h.task_id = t.task_id AND h.root_id = t.root_id AND h.outcome = 'operator'
        ORDER BY h.attempt DESC, h.seq DESC LIMIT 100) o
    ORDER BY o.attempt, o.seq LIMIT 1;
    DELETE FROM corotask.history h
    WHERE h.task_id = t.task_id AND h.root_id = t.root_id AND h.outcome = 'operator' AND (h.attempt > 20 OR h.seq > 0)
      AND (h.attempt, h.seq) < (oldest.attempt, oldest.seq);
END
$$;

-- operator_record without the states: every action but set_state. The
-- form above has no defaults, so that a call with three arguments or fewer
-- names this one.
CREATE OR REPLACE FUNCTION corotask.operator_record(t corotask.tasks, p_action text, p_message jsonb DEFAULT NULL)
RETURNS void
LANGUAGE sql SET search_path = '' AS $$
    SELECT corotask.operator_record(t, p_action, p_message, NULL::jsonb, NULL::jsonb)
$$;

-- retry_task makes a task that waits (retrying after a failure, or
-- sleeping) ready now. Its failures are kept: see reset_failures.
CREATE OR REPLACE FUNCTION corotask.retry_task(p_task uuid) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = '' AS $$
DECLARE
    t corotask.tasks := corotask.operator_lock(p_task, 'retry_task');
    now_at timestamptz := corotask.now(); -- read once, as in cancel_task
BEGIN
    IF t.wake_at IS NULL OR t.wake_at <= corotask.now() THEN
        RAISE EXCEPTION 'corotask: task % is not waiting to be polled', p_task
            USING ERRCODE = 'CT422', DETAIL = 'task ' || p_task,
                  HINT = 'it is ' || corotask.status(t) || ': only a retrying or sleeping task can be retried now';
    END IF;
    -- operator, in place of the timer it cut short (see tasks.woke).
    UPDATE corotask.tasks SET wake_at = now_at, attempts = attempts + 1, woke = (woke & ~8) | 32
    WHERE task_id = p_task AND root_id = t.root_id RETURNING * INTO t;
    PERFORM corotask.operator_record(t, 'retry');
END
$$;

-- reset_failures sets a live task's count of failures in a row back to 0
-- (and clears its last error), so that its type's MaxFailures counts anew.
-- When it took effect, when the task is polled is unchanged.
CREATE OR REPLACE FUNCTION corotask.reset_failures(p_task uuid) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = '' AS $$
DECLARE
    t corotask.tasks := corotask.operator_lock(p_task, 'reset_failures');
BEGIN
    UPDATE corotask.tasks SET failures = 0, last_error = NULL, attempts = attempts + 1
    WHERE task_id = p_task RETURNING * INTO t;
    PERFORM corotask.operator_record(t, 'reset');
END
$$;

-- restart_task brings a failed task back to life, ready now, with its last
-- committed state and its inbox, and no failures. Its parent already
-- received the completion message saying it failed, and is not told of the
-- restart; when the task ends again, its parent (if still alive) receives
-- another completion message. Its children are as they were; it counts
-- those that have not ended again (the completions of those that ended
-- while it had failed were dropped), and its parent counts it again.
CREATE OR REPLACE FUNCTION corotask.restart_task(p_task uuid) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = '' AS $$
DECLARE
    t corotask.tasks;
    parent corotask.tasks;
    now_at timestamptz := corotask.now(); -- read once, as in cancel_task
BEGIN
    -- Its parent counts it again.
    PERFORM corotask.lock_with_parent(p_task);
    t := corotask.operator_lock(p_task, 'restart_task', true);
    IF t.outcome IS DISTINCT FROM 'failed' THEN
        RAISE EXCEPTION 'corotask: task % has not failed', p_task
            USING ERRCODE = 'CT422', DETAIL = 'task ' || p_task,
                  HINT = 'it is ' || corotask.status(t) || ': only a failed task can be restarted';
    END IF;
    -- A child lives only under a live parent (as create_tasks demands): one
    -- whose parent has ended would have nobody to tell, nor be reached by
    -- a cancel of its tree.
    IF t.parent_id IS NOT NULL AND EXISTS (
        SELECT 1 FROM corotask.tasks p WHERE p.task_id = t.parent_id AND p.done_at IS NOT NULL) THEN
        RAISE EXCEPTION 'corotask: task % has a parent that has ended', p_task
            USING ERRCODE = 'CT422', DETAIL = 'task ' || p_task,
                  HINT = 'its parent ' || t.parent_id || ' has ended: restart the parent first, or create a new task';
    END IF;
    -- Its key, live again, must be free: refused naming the live task that
    -- holds it (on Citus, which has no unique index of live keys, under
    -- the key's lock: see lock_keys).
    IF t.task_key IS NOT NULL THEN
        PERFORM corotask.refuse_live_keys(ARRAY[p_task], ARRAY[t.task_type], ARRAY[t.task_key]);
    END IF;
    -- Its children end under the lock of its row (commit_polls locks the
    -- parent of each task it ends, ended or not; fail_poll, fail_claimed
    -- and cancel_task call lock_with_parent), so none ends uncounted.
    -- operator, with the messages and completions that wait (see tasks.woke).
    UPDATE corotask.tasks SET done_at = NULL, outcome = NULL, result = NULL, wake_at = now_at,
        failures = 0, attempts = attempts + 1, woke = (((woke >> 8) | woke) & 6) | 32,
        live_children = (SELECT count(*)::integer FROM corotask.tasks c
                         WHERE c.parent_id = p_task AND c.done_at IS NULL)
    WHERE task_id = p_task RETURNING * INTO t;
    PERFORM corotask.operator_record(t, 'restart');
    -- Its parent counts it among its live children again (see deliver_all).
    -- The parent's row was locked meanwhile, so a claim may have skipped it:
    -- a parent left ready is announced.
    UPDATE corotask.tasks p SET live_children = p.live_children + 1
    WHERE p.task_id = t.parent_id AND p.done_at IS NULL
    RETURNING p.* INTO parent;
    IF FOUND AND corotask.is_ready(parent.claim, parent.done_at, parent.wake_at, corotask.now()) THEN
        PERFORM corotask.announce(ARRAY[parent.task_type]);
    END IF;
END
$$;

-- drop_message removes the message at p_position (1: the oldest) of a live
-- task's inbox and returns it; it is kept in the history row of the action.
-- p_digest names the message the caller read there (message_digest of its
-- envelope): when the message at p_position now is another one (a poll took
-- messages meanwhile, and the inbox moved), it raises CT416 and drops
-- nothing. p_digest NULL drops whatever is at p_position: the form without
-- it, which builds before the digest call, does that.
CREATE OR REPLACE FUNCTION corotask.drop_message(p_task uuid, p_position integer, p_digest text) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = '' AS $$
DECLARE
    t corotask.tasks := corotask.operator_lock(p_task, 'drop_message');
    dropped jsonb;
    at bigint;
    -- No executor holds the task (operator_lock): every message it has is
    -- in its inbox.
    n integer := t.inbox_len;
    found_digest text;
BEGIN
    IF p_position IS NULL OR p_position < 1 OR p_position > n THEN
        RAISE EXCEPTION 'corotask: task % has no message at position %', p_task, p_position
            USING ERRCODE = 'CT416', DETAIL = 'task ' || p_task,
                  HINT = CASE WHEN n = 0 THEN 'position ' || coalesce(p_position::text, 'NULL') || ': its inbox is empty'
                              ELSE 'position ' || coalesce(p_position::text, 'NULL') || ': its inbox holds ' || n
                                   || ' message(s), at positions 1 to ' || n END;
    END IF;
    SELECT m.seq, m.envelope INTO at, dropped FROM corotask.messages m
    WHERE m.task_id = p_task AND m.seq > t.msg_popped
    ORDER BY m.seq OFFSET p_position - 1 LIMIT 1;
    found_digest := corotask.message_digest(dropped);
    IF p_digest IS NOT NULL AND lower(p_digest) <> found_digest THEN
        RAISE EXCEPTION 'corotask: message % of task % is not the one named', p_position, p_task
            USING ERRCODE = 'CT416', DETAIL = 'task ' || p_task,
                  HINT = 'position ' || p_position || ' holds message ' || found_digest || ', not ' || p_digest
                         || ': the inbox changed since it was read; nothing was dropped';
    END IF;
    DELETE FROM corotask.messages WHERE task_id = p_task AND seq = at;
    -- Dropping the first message moves the inbox's start past it.
    UPDATE corotask.tasks SET inbox_len = inbox_len - 1, attempts = attempts + 1,
        msg_popped = CASE WHEN p_position = 1 THEN at ELSE msg_popped END
    WHERE task_id = p_task RETURNING * INTO t;
    PERFORM corotask.operator_record(t, 'drop_message', dropped);
    RETURN dropped;
END
$$;

CREATE OR REPLACE FUNCTION corotask.drop_message(p_task uuid, p_position integer) RETURNS jsonb
LANGUAGE sql SECURITY DEFINER SET search_path = '' AS $$
    SELECT corotask.drop_message(p_task, p_position, NULL::text)
$$;

-- set_task_state replaces the state of a live task no executor holds with
-- p_state, any JSON value (JSON null: the poller's zero value, as a task
-- created without a state has), for an operator who fixes what a poller
-- stored. It returns the state it replaced (SQL NULL: the task had none).
-- Its history row keeps both (state, state_before), whatever the type keeps
-- of its polls' states. When the task is polled is unchanged.
CREATE OR REPLACE FUNCTION corotask.set_task_state(p_task uuid, p_state jsonb) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = '' AS $$
DECLARE
    t corotask.tasks;
    replaced jsonb;
BEGIN
    IF p_state IS NULL THEN
        RAISE EXCEPTION 'corotask: set_task_state needs a state (JSON null for the poller''s zero value)'
            USING ERRCODE = '22004';
    END IF;
    t := corotask.operator_lock(p_task, 'set_task_state');
    replaced := t.inner_state;
    UPDATE corotask.tasks SET inner_state = p_state, attempts = attempts + 1, woke = woke | 32
    WHERE task_id = p_task RETURNING * INTO t;
    PERFORM corotask.operator_record(t, 'set_state', NULL, p_state, replaced);
    RETURN replaced;
END
$$;

-- operator_send sends a message to a task as send_to_task does (p_from NULL:
-- from outside any task; p_trace, the sender's trace context, kept in the
-- envelope), and records it in the task's history with the envelope sent
-- (see operator_record). It is for operators' tools (corotask send, the web
-- UI), whose messages the history should show; programs send with
-- send_to_task, which records nothing. The delivery locks the task's row;
-- a refused message (CT404, CT410, CT413) records nothing.
CREATE OR REPLACE FUNCTION corotask.operator_send(p_to uuid, p_from uuid, p_message jsonb, p_trace jsonb DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = '' AS $$
DECLARE
    env jsonb;
    t corotask.tasks;
BEGIN
    IF p_to IS NULL THEN
        RAISE EXCEPTION 'corotask: operator_send needs a task id' USING ERRCODE = '22004';
    END IF;
    env := corotask.envelope(p_from, p_message, p_trace);
    IF NOT corotask.deliver_one(p_to, env) THEN
        PERFORM corotask.refuse_undelivered(ARRAY[p_to], '{}');
    END IF;
    -- operator, beside message (see tasks.woke).
    UPDATE corotask.tasks SET woke = woke | 32 WHERE task_id = p_to RETURNING * INTO t;
    PERFORM corotask.operator_record(t, 'send', env);
END
$$;

REVOKE EXECUTE ON FUNCTION
    corotask.retry_task(uuid),
    corotask.reset_failures(uuid),
    corotask.restart_task(uuid),
    corotask.drop_message(uuid, integer),
    corotask.drop_message(uuid, integer, text),
    corotask.set_task_state(uuid, jsonb),
    corotask.operator_send(uuid, uuid, jsonb, jsonb)
FROM PUBLIC;
