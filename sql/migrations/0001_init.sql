-- corotask schema, version 1: the tasks table, its indexes, and the SQL API
-- (create_task, send_to_task, cancel_task) that the Go packages and users'
-- own SQL (functions, triggers) share.

CREATE TABLE corotask.tasks (
    task_id     uuid        PRIMARY KEY,
    task_type   text        NOT NULL
        CONSTRAINT task_type_valid CHECK (char_length(task_type) BETWEEN 1 AND 200),
    parent_id   uuid,
    inner_state jsonb,
    -- NULL: suspended until a message arrives (or ended, see done_at).
    wake_at     timestamptz DEFAULT now(),
    inbox       jsonb[]     NOT NULL DEFAULT '{}',
    inbox_next  jsonb[]     NOT NULL DEFAULT '{}',
    -- '0001-01-01' means "not running"; anything else is the last renewal of the current claim.
    heartbeat   timestamptz NOT NULL DEFAULT '0001-01-01 00:00:00+00',
    -- A fresh token per claim; heartbeats and commits match on it (fencing).
    claim       uuid,
    failures    integer     NOT NULL DEFAULT 0,
    last_error  text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    done_at     timestamptz,
    -- How the task ended: 'done', 'failed' or 'canceled'; NULL while it lives.
    outcome     text
        CONSTRAINT outcome_valid CHECK (outcome IN ('done', 'failed', 'canceled')),
    result      jsonb,
    CONSTRAINT ended_consistent CHECK ((done_at IS NULL) = (outcome IS NULL))
);

COMMENT ON TABLE corotask.tasks IS
'Durable coroutine-style tasks. Executors claim ready tasks (or tasks whose heartbeat is stale), poll them and commit the new state fenced on "claim". Messages to a task being polled accrue in inbox_next and are moved into inbox when the poll commits.';

-- Claim of ready tasks: only live, unclaimed, non-suspended tasks are indexed,
-- so the claim does not slow down with the number of running, suspended or ended tasks.
CREATE INDEX tasks_ready_idx ON corotask.tasks (wake_at) INCLUDE (task_type)
    WHERE heartbeat = '0001-01-01 00:00:00+00' AND done_at IS NULL AND wake_at IS NOT NULL;
-- Claim of tasks whose executor stopped renewing its heartbeat.
CREATE INDEX tasks_running_idx ON corotask.tasks (heartbeat)
    WHERE heartbeat <> '0001-01-01 00:00:00+00';
CREATE INDEX tasks_parent_idx ON corotask.tasks (parent_id, task_id) WHERE parent_id IS NOT NULL;
-- Retention of ended tasks.
CREATE INDEX tasks_done_idx ON corotask.tasks (done_at) WHERE done_at IS NOT NULL;

-- Tasks are updated several times over their life; keep room for HOT updates and
-- vacuum early so a busy table does not bloat.
ALTER TABLE corotask.tasks SET (
    fillfactor = 80,
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.05
);

-- The largest message body accepted, in bytes of its stored jsonb form.
CREATE FUNCTION corotask.max_message_bytes() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT 1048576';

-- The derived status of a task, as the Go API and the CLI report it.
CREATE FUNCTION corotask.status(t corotask.tasks) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN t.outcome IS NOT NULL THEN t.outcome
        WHEN t.heartbeat <> '0001-01-01 00:00:00+00' THEN 'running'
        WHEN t.wake_at IS NULL THEN 'suspended'
        WHEN t.wake_at > now() THEN 'sleeping'
        ELSE 'ready'
    END
$$;

-- create_task(s), send_to_task and cancel_task run with the rights of the
-- schema's owner (SECURITY DEFINER, with an empty search_path), so a role
-- that may only send messages or create tasks needs USAGE on the schema and
-- EXECUTE on that function, and no privilege on the table itself. EXECUTE on
-- them is revoked from PUBLIC at the end of this file: grant it per role.

-- Errors raised by these functions carry their own SQLSTATEs so that clients can
-- tell them apart: CT404 (no such task), CT410 (task has ended), CT413 (message too
-- large). DETAIL holds "<role> <uuid>" for the first two.

-- envelope wraps a message body as stored in an inbox, refusing oversized bodies.
CREATE FUNCTION corotask.envelope(p_from uuid, p_body jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE SET search_path = '' AS $$
DECLARE
    size integer := pg_column_size(p_body);
BEGIN
    IF size > corotask.max_message_bytes() THEN
        RAISE EXCEPTION 'corotask: message of % bytes is larger than the limit of % bytes',
            size, corotask.max_message_bytes()
            USING ERRCODE = 'CT413', DETAIL = size::text;
    END IF;
    RETURN jsonb_build_object('from', p_from, 'body', p_body);
END
$$;

-- The functions below that join arrays of task IDs to corotask.tasks run with
-- enable_seqscan, enable_hashjoin and enable_mergejoin off. plpgsql caches a
-- generic plan after a few calls, which guesses the arrays' size; on a table
-- of a few thousand rows or more it then hashes a sequential scan of the whole
-- table where a few index probes would do. Every statement here touches only
-- the rows its arrays name, by task_id, so index probes are always right.

-- create_tasks inserts many tasks in one statement. Each array holds one element
-- per task; parents must exist (or be created in the same call) and not have ended.
-- A task with a message gets it as its first inbox entry, from its parent.
CREATE FUNCTION corotask.create_tasks(
    p_ids      uuid[],
    p_types    text[],
    p_parents  uuid[],
    p_states   jsonb[],
    p_messages jsonb[],
    p_wake_ats timestamptz[]
) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ''
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off AS $$
DECLARE
    bad uuid;
BEGIN
    SELECT p INTO bad FROM unnest(p_parents) AS p
    WHERE p IS NOT NULL AND p <> ALL (p_ids)
      AND NOT EXISTS (SELECT 1 FROM corotask.tasks t WHERE t.task_id = p)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'corotask: parent task % not found', bad
            USING ERRCODE = 'CT404', DETAIL = 'parent ' || bad;
    END IF;
    -- FOR SHARE waits for a concurrent cancel of the parent, so a child is never
    -- added under a parent that is being canceled.
    PERFORM 1 FROM corotask.tasks t
    WHERE t.task_id IN (SELECT DISTINCT p FROM unnest(p_parents) AS p WHERE p IS NOT NULL)
    ORDER BY t.task_id
    FOR SHARE;
    SELECT t.task_id INTO bad FROM corotask.tasks t
    WHERE t.task_id IN (SELECT DISTINCT p FROM unnest(p_parents) AS p WHERE p IS NOT NULL)
      AND t.done_at IS NOT NULL
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'corotask: parent task % has ended', bad
            USING ERRCODE = 'CT410', DETAIL = 'parent ' || bad;
    END IF;
    INSERT INTO corotask.tasks (task_id, task_type, parent_id, inner_state, wake_at, inbox)
    SELECT u.id, u.typ, u.parent, u.state, coalesce(u.wake_at, now()),
           CASE WHEN u.msg IS NULL THEN '{}'::jsonb[]
                ELSE ARRAY[corotask.envelope(u.parent, u.msg)] END
    FROM unnest(p_ids, p_types, p_parents, p_states, p_messages, p_wake_ats)
        AS u(id, typ, parent, state, msg, wake_at);
END
$$;

-- create_task creates one task; see create_tasks. p_wake_at NULL means now.
CREATE FUNCTION corotask.create_task(
    p_task_id   uuid,
    p_task_type text,
    p_parent_id uuid DEFAULT NULL,
    p_state     jsonb DEFAULT NULL,
    p_message   jsonb DEFAULT NULL,
    p_wake_at   timestamptz DEFAULT NULL
) RETURNS uuid
LANGUAGE plpgsql SECURITY DEFINER SET search_path = '' AS $$
BEGIN
    PERFORM corotask.create_tasks(ARRAY[p_task_id], ARRAY[p_task_type], ARRAY[p_parent_id],
        ARRAY[p_state], ARRAY[p_message], ARRAY[p_wake_at]);
    RETURN p_task_id;
END
$$;

-- deliver appends an envelope to a live task's inbox (or inbox_next while it is being
-- polled) and wakes it. It returns false when the task does not exist or has ended.
CREATE FUNCTION corotask.deliver(p_to uuid, p_envelope jsonb) RETURNS boolean
LANGUAGE plpgsql SET search_path = ''
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off AS $$
BEGIN
    UPDATE corotask.tasks SET
        inbox = CASE WHEN heartbeat = '0001-01-01 00:00:00+00'
                     THEN array_append(inbox, p_envelope) ELSE inbox END,
        inbox_next = CASE WHEN heartbeat = '0001-01-01 00:00:00+00'
                          THEN inbox_next ELSE array_append(inbox_next, p_envelope) END,
        -- LEAST ignores NULL, so a suspended task (wake_at NULL) wakes now too.
        wake_at = LEAST(wake_at, now())
    WHERE task_id = p_to AND done_at IS NULL;
    RETURN FOUND;
END
$$;

-- send_to_task sends a message to a task, from another task or (p_from NULL) from
-- outside any task. It raises CT404 for an unknown task and CT410 for an ended one:
-- a message is never dropped silently.
CREATE FUNCTION corotask.send_to_task(p_to uuid, p_from uuid, p_message jsonb) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = '' AS $$
BEGIN
    IF p_to IS NULL THEN
        RAISE EXCEPTION 'corotask: send_to_task needs a task id' USING ERRCODE = '22004';
    END IF;
    IF NOT corotask.deliver(p_to, corotask.envelope(p_from, p_message)) THEN
        IF EXISTS (SELECT 1 FROM corotask.tasks WHERE task_id = p_to) THEN
            RAISE EXCEPTION 'corotask: task % has ended', p_to
                USING ERRCODE = 'CT410', DETAIL = 'task ' || p_to;
        END IF;
        RAISE EXCEPTION 'corotask: task % not found', p_to
            USING ERRCODE = 'CT404', DETAIL = 'task ' || p_to;
    END IF;
END
$$;

-- completion builds the one message a parent receives when its child ends.
CREATE FUNCTION corotask.completion(p_child uuid, p_outcome text, p_result jsonb, p_error text)
RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('from', p_child, 'body', p_result, 'done', true)
        || CASE p_outcome
               WHEN 'failed' THEN jsonb_build_object('err', coalesce(p_error, 'failed'))
               WHEN 'canceled' THEN jsonb_build_object('err', 'canceled')
               ELSE '{}'::jsonb
           END
$$;

-- cancel_task cancels a task and all its live descendants, and returns how many
-- tasks it canceled. The canceled task's parent, if alive, gets one completion
-- message; running polls of canceled tasks are told through NOTIFY corotask_cancel.
CREATE FUNCTION corotask.cancel_task(p_task uuid) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = '' AS $$
DECLARE
    root corotask.tasks;
    n integer;
    notified integer;
    total integer := 0;
BEGIN
    IF p_task IS NULL THEN
        RAISE EXCEPTION 'corotask: cancel_task needs a task id' USING ERRCODE = '22004';
    END IF;
    SELECT * INTO root FROM corotask.tasks WHERE task_id = p_task FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'corotask: task % not found', p_task
            USING ERRCODE = 'CT404', DETAIL = 'task ' || p_task;
    END IF;
    IF root.done_at IS NOT NULL THEN
        RAISE EXCEPTION 'corotask: task % has ended', p_task
            USING ERRCODE = 'CT410', DETAIL = 'task ' || p_task;
    END IF;
    PERFORM pg_notify('corotask_cancel', p_task::text) WHERE root.heartbeat <> '0001-01-01 00:00:00+00';
    UPDATE corotask.tasks SET done_at = now(), outcome = 'canceled', wake_at = NULL,
        heartbeat = '0001-01-01 00:00:00+00', claim = NULL
    WHERE task_id = p_task;
    total := 1;
    -- Each pass is a new statement with a new snapshot, so children added by a poll
    -- that committed while we waited for a lock are found by the next pass.
    LOOP
        WITH RECURSIVE tree AS (
            SELECT t.task_id, t.heartbeat FROM corotask.tasks t WHERE t.task_id = p_task
            UNION
            SELECT c.task_id, c.heartbeat FROM corotask.tasks c JOIN tree ON c.parent_id = tree.task_id
        ), canceled AS (
            UPDATE corotask.tasks t SET done_at = now(), outcome = 'canceled', wake_at = NULL,
                heartbeat = '0001-01-01 00:00:00+00', claim = NULL
            FROM tree
            WHERE t.task_id = tree.task_id AND t.done_at IS NULL
            RETURNING t.task_id, tree.heartbeat AS old_heartbeat
        )
        SELECT count(*),
               count(pg_notify('corotask_cancel', task_id::text))
                   FILTER (WHERE old_heartbeat <> '0001-01-01 00:00:00+00')
        INTO n, notified FROM canceled;
        EXIT WHEN n = 0;
        total := total + n;
    END LOOP;
    IF root.parent_id IS NOT NULL THEN
        PERFORM corotask.deliver(root.parent_id, corotask.completion(p_task, 'canceled', NULL, NULL));
    END IF;
    RETURN total;
END
$$;

-- Executors LISTEN on corotask_ready; the payload is the task type. Triggers
-- announce every insert or update that leaves a task ready, whoever made it.
-- Inserts are announced once per statement (bulk creation); updates per row,
-- but only rows that are ready afterwards, so that claims, heartbeats and
-- commits that end or park a task cost nothing here. NOTIFY folds duplicate
-- payloads within a transaction.
CREATE FUNCTION corotask.announce_created() RETURNS trigger
LANGUAGE plpgsql SET search_path = '' AS $$
BEGIN
    PERFORM pg_notify('corotask_ready', s.task_type)
    FROM (SELECT DISTINCT c.task_type FROM created c
          WHERE c.wake_at <= now() AND c.heartbeat = '0001-01-01 00:00:00+00' AND c.done_at IS NULL) s;
    RETURN NULL;
END
$$;

CREATE FUNCTION corotask.announce_ready() RETURNS trigger
LANGUAGE plpgsql SET search_path = '' AS $$
BEGIN
    PERFORM pg_notify('corotask_ready', NEW.task_type);
    RETURN NULL;
END
$$;

CREATE TRIGGER tasks_announce_insert AFTER INSERT ON corotask.tasks
    REFERENCING NEW TABLE AS created
    FOR EACH STATEMENT EXECUTE FUNCTION corotask.announce_created();
CREATE TRIGGER tasks_announce_update AFTER UPDATE ON corotask.tasks
    FOR EACH ROW
    WHEN (NEW.heartbeat = '0001-01-01 00:00:00+00' AND NEW.done_at IS NULL AND NEW.wake_at <= now())
    EXECUTE FUNCTION corotask.announce_ready();

-- The executor's side. A claim sets heartbeat and a fresh claim token; every
-- later write of the poll matches on that token, so a poll whose claim was
-- lost (stolen after a stall, canceled, released) changes nothing.

-- commit_polls commits successful polls, many in one statement (and so one
-- transaction and one WAL flush): for each, its state, the inbox swap (messages
-- the poll did not take, then those that arrived during it), its next wake_at,
-- and its effects (children, messages, the completion message to the parent
-- when it is done), all or nothing. p_actions[i] is 'yield', 'sleep'
-- (p_sleeps[i] seconds from now), 'until' (p_ats[i]), 'suspend' or 'done'
-- (with p_results[i]). p_effects[i] is NULL or
-- {"spawn": [{"id", "type", "state", "msg"}...], "send": [{"to", "msg"}...]}.
-- It returns the tasks whose claim still matched; the others are unchanged.
CREATE FUNCTION corotask.commit_polls(
    p_tasks   uuid[],
    p_claims  uuid[],
    p_states  jsonb[],
    p_taken   integer[],
    p_actions text[],
    p_sleeps  float8[],
    p_ats     timestamptz[],
    p_results jsonb[],
    p_effects jsonb[]
) RETURNS SETOF uuid
LANGUAGE plpgsql SET search_path = ''
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off AS $$
DECLARE
    r record;
    others uuid[];
    spawners uuid[] := '{}';  -- polls that spawned, in batch order ...
    spawns jsonb[] := '{}';   -- ... and their children
    senders uuid[] := '{}';   -- polls that sent messages, in batch order ...
    sends jsonb[] := '{}';    -- ... and their messages
    children uuid[] := '{}';  -- tasks this batch ended that have a parent ...
    parents uuid[] := '{}';   -- ... their parents ...
    results jsonb[] := '{}';  -- ... and their results
BEGIN
    IF EXISTS (SELECT 1 FROM unnest(p_actions) AS a
               WHERE a IS NULL OR a NOT IN ('yield', 'sleep', 'until', 'suspend', 'done')) THEN
        RAISE EXCEPTION 'corotask: unknown poll action in %', p_actions;
    END IF;
    -- A commit that writes rows beyond its own tasks (messages to other
    -- tasks, completions to parents) locks every row it writes in task_id
    -- order before writing any, so that two such commits wait for each other
    -- instead of deadlocking (two tasks that message each other, committed at
    -- once by two executors). A commit that writes only its own tasks (claims
    -- are exclusive) needs no such pass; heartbeat renewals never wait.
    SELECT array_agg(x) INTO others FROM (
        SELECT (s.e ->> 'to')::uuid AS x
        FROM unnest(p_effects) AS f(eff), jsonb_array_elements(f.eff -> 'send') AS s(e)
        WHERE f.eff ? 'send'
        UNION
        SELECT p.parent_id FROM unnest(p_tasks, p_actions) AS u(task_id, action)
        JOIN corotask.tasks p ON p.task_id = u.task_id
        WHERE u.action = 'done' AND p.parent_id IS NOT NULL
    ) o;
    IF others IS NOT NULL THEN
        PERFORM 1 FROM corotask.tasks t
        WHERE t.task_id = ANY (p_tasks || others)
        ORDER BY t.task_id
        FOR UPDATE;
    END IF;
    FOR r IN
        WITH input AS (
            SELECT * FROM unnest(p_tasks, p_claims, p_states, p_taken, p_actions, p_sleeps, p_ats, p_results, p_effects)
                WITH ORDINALITY AS u(task_id, claim, state, taken, action, sleep, at, result, effects, i)
        ), committed AS (
            UPDATE corotask.tasks t SET
                inner_state = u.state,
                inbox = t.inbox[u.taken + 1:] || t.inbox_next,
                inbox_next = '{}',
                heartbeat = '0001-01-01 00:00:00+00',
                claim = NULL,
                failures = 0,
                last_error = NULL,
                -- Messages that arrived during the poll make the task ready at once.
                wake_at = CASE
                    WHEN u.action = 'done' THEN NULL
                    WHEN cardinality(t.inbox_next) > 0 THEN now()
                    WHEN u.action = 'yield' THEN now()
                    WHEN u.action = 'sleep' THEN now() + make_interval(secs => u.sleep)
                    WHEN u.action = 'until' THEN u.at
                END,
                done_at = CASE WHEN u.action = 'done' THEN now() END,
                outcome = CASE WHEN u.action = 'done' THEN 'done' END,
                result = CASE WHEN u.action = 'done' THEN u.result END
            FROM input u
            WHERE t.task_id = u.task_id AND t.claim = u.claim
            RETURNING t.task_id, t.parent_id, u.action, u.result, u.effects, u.i
        )
        SELECT * FROM committed ORDER BY i
    LOOP
        RETURN NEXT r.task_id;
        IF jsonb_array_length(coalesce(r.effects -> 'spawn', '[]')) > 0 THEN
            spawners := array_append(spawners, r.task_id);
            spawns := array_append(spawns, (r.effects -> 'spawn'));
        END IF;
        IF jsonb_array_length(coalesce(r.effects -> 'send', '[]')) > 0 THEN
            senders := array_append(senders, r.task_id);
            sends := array_append(sends, (r.effects -> 'send'));
        END IF;
        IF r.action = 'done' AND r.parent_id IS NOT NULL THEN
            children := array_append(children, r.task_id);
            parents := array_append(parents, r.parent_id);
            results := array_append(results, r.result);
        END IF;
    END LOOP;
    -- Effects are applied per batch, not per poll: every child in one
    -- create_tasks, then the messages in batch order (after the children, so
    -- that a poll may message the child it spawned), then one update of each
    -- parent with the completions of its children, in batch order.
    IF cardinality(spawners) > 0 THEN
        PERFORM corotask.create_tasks(
            array_agg((e ->> 'id')::uuid ORDER BY k, n),
            array_agg(e ->> 'type' ORDER BY k, n),
            array_agg(x.parent ORDER BY k, n),
            array_agg(CASE WHEN e ? 'state' THEN e -> 'state' END ORDER BY k, n),
            array_agg(CASE WHEN e ? 'msg' THEN e -> 'msg' END ORDER BY k, n),
            array_agg(NULL::timestamptz ORDER BY k, n))
        FROM unnest(spawners, spawns) WITH ORDINALITY AS x(parent, spawn, k),
             jsonb_array_elements(x.spawn) WITH ORDINALITY AS s(e, n);
    END IF;
    IF cardinality(senders) > 0 THEN
        PERFORM corotask.send_to_task((e ->> 'to')::uuid, x.sender, e -> 'msg')
        FROM unnest(senders, sends) WITH ORDINALITY AS x(sender, send, k),
             jsonb_array_elements(x.send) WITH ORDINALITY AS s(e, n)
        ORDER BY k, n;
    END IF;
    IF cardinality(children) > 0 THEN
        -- As corotask.deliver does, for each parent at once. MATERIALIZED
        -- keeps the aggregate from being re-run per row of the join.
        WITH c AS MATERIALIZED (
            SELECT x.parent, array_agg(corotask.completion(x.child, 'done', x.result, NULL) ORDER BY k) AS envs
            FROM unnest(parents, children, results) WITH ORDINALITY AS x(parent, child, result, k)
            GROUP BY x.parent
        )
        UPDATE corotask.tasks t SET
            inbox = CASE WHEN t.heartbeat = '0001-01-01 00:00:00+00'
                         THEN t.inbox || c.envs ELSE t.inbox END,
            inbox_next = CASE WHEN t.heartbeat = '0001-01-01 00:00:00+00'
                              THEN t.inbox_next ELSE t.inbox_next || c.envs END,
            wake_at = LEAST(t.wake_at, now())
        FROM c
        WHERE t.task_id = c.parent AND t.done_at IS NULL;
    END IF;
END
$$;

-- fail_poll records a failed poll: nothing of the poll is kept, failures goes
-- up, messages that arrived during the poll join the inbox, and the task sleeps
-- for p_backoff. When p_max_failures > 0 and the task has now failed that many
-- times in a row, it ends as failed and its parent is told. It returns the
-- task's outcome ('failed' or NULL), or NULL with claim_lost when the claim no
-- longer matches.
CREATE FUNCTION corotask.fail_poll(
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
        heartbeat = '0001-01-01 00:00:00+00',
        claim = NULL,
        wake_at = CASE WHEN p_max_failures > 0 AND failures + 1 >= p_max_failures
                       THEN NULL ELSE now() + p_backoff END,
        done_at = CASE WHEN p_max_failures > 0 AND failures + 1 >= p_max_failures THEN now() END,
        outcome = CASE WHEN p_max_failures > 0 AND failures + 1 >= p_max_failures THEN 'failed' END
    WHERE task_id = p_task AND claim = p_claim
    RETURNING parent_id, outcome IS NOT NULL INTO parent, ended;
    claim_lost := NOT FOUND;
    ended := coalesce(ended, false);
    IF ended AND parent IS NOT NULL THEN
        PERFORM corotask.deliver(parent, corotask.completion(p_task, 'failed', NULL, p_error));
    END IF;
END
$$;

-- release_claims gives claims back without counting a failure (an executor
-- shutting down): the tasks are ready for another executor at once.
CREATE FUNCTION corotask.release_claims(p_tasks uuid[], p_claims uuid[]) RETURNS integer
LANGUAGE sql SET search_path = ''
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off AS $$
    WITH released AS (
        UPDATE corotask.tasks t SET
            inbox = t.inbox || t.inbox_next,
            inbox_next = '{}',
            heartbeat = '0001-01-01 00:00:00+00',
            claim = NULL,
            wake_at = LEAST(t.wake_at, now())
        FROM unnest(p_tasks, p_claims) AS c(task_id, claim)
        WHERE t.task_id = c.task_id AND t.claim = c.claim
        RETURNING 1
    )
    SELECT count(*)::integer FROM released
$$;

REVOKE EXECUTE ON FUNCTION
    corotask.create_tasks(uuid[], text[], uuid[], jsonb[], jsonb[], timestamptz[]),
    corotask.create_task(uuid, text, uuid, jsonb, jsonb, timestamptz),
    corotask.send_to_task(uuid, uuid, jsonb),
    corotask.cancel_task(uuid)
FROM PUBLIC;
