-- The executor's side of a successful poll. A claim sets a fresh claim token
-- and its expiry; every later write of the poll matches on that token, so a
-- poll whose claim was lost (stolen after a stall, canceled, released)
-- changes nothing.

-- commit_polls commits successful polls, many in one statement (and so one
-- transaction and one WAL flush): for each, its state, the inbox swap (the
-- messages it popped leave, those that arrived during it join the inbox),
-- its next wake_at,
-- and its effects (children, messages, the completion message to the parent
-- when it is done), all or nothing. p_actions[i] is 'yield', 'sleep'
-- (p_sleeps[i] seconds from now), 'until' (p_ats[i]), 'suspend', 'await' (its
-- children: see deliver_all) or 'done' (with p_results[i]). p_effects[i] is NULL or
-- {"spawn": [{"id", "type", "state", "msg", "trace", "key", "priority", "limit_key"}...], "send": [{"to", "msg", "trace"}...]},
-- where "trace", when present, is the trace context of the poll, kept with
-- the child task and in the message's envelope, and "key", when present, is
-- the child's key: a key that a live task of the child's type holds, or
-- another child of the batch, fails the batch with 23505 naming the task
-- that holds it (see refuse_live_keys), as does a key that a task of the
-- child's type ended within the type's key window (refuse_windowed_keys).
--
-- p_taken[i] is how many messages the poll popped: the messages of seq
-- p_pop_from[i] to p_pop_to[i] (the first and last of them, from the window
-- its claim handed it; NULL when it popped none).
--
-- A 'done' whose task received messages during the poll (inbox_next not
-- empty) is superseded: as Temporal refuses to complete a workflow with
-- unhandled signals, nothing of the poll is kept (state, popped messages,
-- children, messages sent, result), its claim is released and the task is
-- ready at once, so that a poll sees those messages before the task can end.
--
-- Each committed poll whose p_history[i] is 1 or 2 gets its row in
-- corotask.history (2: with its state), all in one INSERT, and the task's
-- history is trimmed to its first p_keep_first and last p_keep_last attempts
-- (see corotask.trim_history).
--
-- p_parents[i] is the parent of p_tasks[i] (NULL: none), as the executor
-- claimed it; p_roots[i], when p_roots is not NULL, the root of its tree
-- (NULL: not known), which its parent shares. One server does not read
-- them; on Citus a commit that knows the roots of the rows it writes locks
-- them without a read over every shard to find them.
--
-- A spawned child with a "claim" token is created claimed by executor
-- p_claimed_by, for p_claim_secs, as a claim statement would leave it (its
-- first attempt): the executor whose poll spawned it polls it next, without a
-- claim statement (see executor.Config.DisableEagerChildren). Without
-- p_claimed_by, every child is created ready.
--
-- It returns the tasks whose claim still matched, each with whether its poll
-- was superseded; the others are unchanged. It also returns, with
-- superseded NULL, the children it was asked to create claimed but created
-- ready, their type having flow controls (see corotask.type_controls).
DROP FUNCTION IF EXISTS corotask.commit_polls(uuid[], uuid[], jsonb[], integer[], text[], float8[], timestamptz[],
    jsonb[], jsonb[], smallint[], integer, integer, uuid[], uuid, float8, bigint[], bigint[]);
CREATE OR REPLACE FUNCTION corotask.commit_polls(
    p_tasks      uuid[],
    p_claims     uuid[],
    p_states     jsonb[],
    p_taken      integer[],
    p_actions    text[],
    p_sleeps     float8[],
    p_ats        timestamptz[],
    p_results    jsonb[],
    p_effects    jsonb[],
    p_history    smallint[],
    p_keep_first integer,
    p_keep_last  integer,
    p_parents    uuid[],
    p_claimed_by uuid,
    p_claim_secs float8,
    p_pop_from   bigint[],
    p_pop_to     bigint[],
    -- Last, with a default: builds before it call the function without it.
    p_roots      uuid[] DEFAULT NULL
) RETURNS TABLE (polled uuid, superseded boolean)
LANGUAGE plpgsql SET search_path = ''
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off
SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    others uuid[];
    ids uuid[];           -- the polls whose claim matched, in batch order ...
    dropped boolean[];    -- ... and whether each was superseded
    spawners uuid[];      -- the kept polls with effects, in batch order ...
    effects jsonb[];      -- ... and their effects ...
    spawner_roots uuid[]; -- ... and their tasks' roots (their children's)
    ended_spawner uuid;   -- a poll that spawned and ended the task
    send_to uuid[];       -- recipients of the messages polls sent, in batch order ...
    sent jsonb[];         -- ... and the messages' envelopes
    parents uuid[];       -- parents of the tasks this batch ended ...
    completions jsonb[];  -- ... and their completion messages
    controlled text[] := '{}'; -- the types of eager children that have flow controls
    ready text[];         -- the types of the polled tasks left ready, then of the children created ready
    -- The time is read once, and the sleeps' ends computed in input, not
    -- in the UPDATE's CASE: Citus refuses a STABLE function or operator
    -- (corotask.now(), timestamptz + interval) inside a CASE of an UPDATE
    -- of a distributed table; a variable is a parameter of the statement.
    v_now timestamptz := corotask.now();
    lock_roots uuid[];    -- on Citus, the rows are locked shard by shard: its trees ...
    lock_ids uuid[];      -- ... and these rows of them
    known_ids uuid[];     -- on Citus, the rows to lock whose roots p_roots gives ...
    known_roots uuid[];   -- ... and those roots
    -- On Citus, the trees of the batch's tasks and of the rows it writes:
    -- the statements below name them, so that Citus sends each only to the
    -- shards that hold them. The filters are comments marked "citus:",
    -- which sql.Distribute makes part of the statements on a distributed
    -- database only (sql/distribute.go): on one server a filter that passes
    -- every row cost the generic plans of this function 16% of tree's
    -- tasks/s.
    v_roots uuid[];
BEGIN
    IF EXISTS (SELECT 1 FROM unnest(p_actions) AS a
               WHERE a IS NULL OR a NOT IN ('yield', 'sleep', 'until', 'suspend', 'await', 'done')) THEN
        RAISE EXCEPTION 'corotask: unknown poll action in %', p_actions;
    END IF;
    -- A claim without an expiry would never be taken over.
    IF p_claimed_by IS NOT NULL AND NOT coalesce(p_claim_secs > 0, false) THEN
        RAISE EXCEPTION 'corotask: children claimed by executor % need a positive claim duration, not %',
            p_claimed_by, p_claim_secs USING ERRCODE = '22023';
    END IF;
    -- A commit that may create children claimed (eager) holds the controls
    -- lock shared, as a claim does (see corotask.controls_lock_key), from the
    -- start, before any row: it reads the controls of those children's
    -- types below, and a change of them waits for it.
    IF p_claimed_by IS NOT NULL THEN
        PERFORM pg_advisory_xact_lock_shared(corotask.controls_lock_key());
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
        SELECT u.parent FROM unnest(p_parents, p_actions) AS u(parent, action)
        WHERE u.action = 'done' AND u.parent IS NOT NULL
    ) o;
    IF current_setting('corotask.distributed', true) = 'on' THEN
        -- On Citus (sql.Distribute sets the database's
        -- corotask.distributed), FOR UPDATE runs only on one shard, and a
        -- statement over several shards locks their rows in parallel, in
        -- no order: every commit locks its tasks too, with the rows beyond
        -- them, shard by shard, in the order of (shard, task_id), one
        -- statement per shard (its trees' roots named: Citus routes FOR
        -- UPDATE with several roots when they share a shard). The roots
        -- p_roots gives (of the polls' tasks, and of their parents, which
        -- share them) need no read; the others (of the tasks messaged, or
        -- all when the caller gives none) are read over every shard.
        SELECT array_agg(k.id), array_agg(k.root) INTO known_ids, known_roots FROM (
            SELECT u.id, u.root FROM unnest(p_tasks, p_roots) AS u(id, root) WHERE u.id IS NOT NULL AND u.root IS NOT NULL
            UNION
            SELECT u.parent, u.root FROM unnest(p_parents, p_roots, p_actions) AS u(parent, root, action)
            WHERE u.root IS NOT NULL AND u.parent IS NOT NULL AND u.action = 'done'
        ) k;
        IF EXISTS (SELECT 1 FROM unnest(p_tasks || others) AS x WHERE x <> ALL (coalesce(known_ids, '{}'))) THEN
            SELECT known_ids || array_agg(t.task_id), known_roots || array_agg(t.root_id)
            INTO known_ids, known_roots
            FROM corotask.tasks t
            WHERE t.task_id = ANY (ARRAY(SELECT x FROM unnest(p_tasks || others) AS x
                                         WHERE x <> ALL (coalesce(known_ids, '{}'))));
        END IF;
        FOR lock_roots, lock_ids IN
            SELECT array_agg(DISTINCT k.root), array_agg(k.id) FROM unnest(known_ids, known_roots) AS k(id, root)
            GROUP BY pg_catalog.get_shard_id_for_distribution_column('corotask.tasks', k.root)
            ORDER BY pg_catalog.get_shard_id_for_distribution_column('corotask.tasks', k.root)
        LOOP
            PERFORM 1 FROM corotask.tasks t
            WHERE t.root_id = ANY (lock_roots) AND t.task_id = ANY (lock_ids)
            ORDER BY t.task_id
            FOR UPDATE;
            v_roots := v_roots || lock_roots;
        END LOOP;
    ELSIF others IS NOT NULL THEN
        PERFORM 1 FROM corotask.tasks t
        WHERE t.task_id = ANY (p_tasks || others)
        ORDER BY t.task_id
        FOR UPDATE;
    END IF;
    -- One statement writes the polls and their history, and gathers, as
    -- arrays, what the rest of the commit needs: the batch is handled as a
    -- set, not a row at a time.
    WITH input AS (
        SELECT u.*, coalesce(jsonb_array_length(u.effects -> 'spawn'), 0) AS spawned,
            v_now + make_interval(secs => u.sleep) AS sleep_at
        FROM unnest(p_tasks, p_claims, p_states, p_taken, p_actions, p_sleeps, p_ats, p_results, p_effects, p_history,
                    p_pop_from, p_pop_to)
            WITH ORDINALITY AS u(task_id, claim, state, taken, action, sleep, at, result, effects, history,
                                 pop_from, pop_to, i)
    ), committed AS (
        UPDATE corotask.tasks t SET
            -- A superseded poll (done, with messages arrived meanwhile)
            -- keeps nothing: the task is as its previous poll left it.
            inner_state = CASE WHEN u.action = 'done' AND t.inbox_next_len > 0
                               THEN t.inner_state ELSE u.state END,
            -- The popped messages leave (see popped below), those that
            -- arrived during the poll join the inbox.
            msg_popped = CASE WHEN (u.action = 'done' AND t.inbox_next_len > 0) OR u.taken = 0
                              THEN t.msg_popped ELSE u.pop_to END,
            inbox_len = t.inbox_len + t.inbox_next_len
                - CASE WHEN u.action = 'done' AND t.inbox_next_len > 0 THEN 0 ELSE u.taken END,
            inbox_next_len = 0,
            next_wakes = false,
            heartbeat = NULL,
            claim = NULL,
            claim_expires_at = NULL,
            failures = CASE WHEN u.action = 'done' AND t.inbox_next_len > 0
                            THEN t.failures ELSE 0 END,
            last_error = CASE WHEN u.action = 'done' AND t.inbox_next_len > 0
                              THEN t.last_error END,
            -- A superseded poll spawned nothing (it is never 'await').
            live_children = t.live_children
                + CASE WHEN u.action = 'done' AND t.inbox_next_len > 0 THEN 0 ELSE u.spawned END,
            awaiting_children = u.action = 'await',
            -- Why the task will be due (see the column's comment): what
            -- arrived during the poll (the low byte: messages, completions,
            -- an operator's send), and what the action
            -- arms: its timer, or a yield (an await with no child left is
            -- one).
            -- A superseded poll keeps nothing, its reasons included: they
            -- are the next poll's still.
            woke = CASE WHEN u.action = 'done' AND t.inbox_next_len > 0
                        THEN ((t.woke >> 8) | t.woke) & 127
                        ELSE t.woke & 38 END | CASE
                WHEN t.inbox_next_len > 0 THEN 0
                WHEN u.action IN ('sleep', 'until') THEN 8
                WHEN u.action = 'yield' THEN 64
                WHEN u.action = 'await' AND t.live_children + u.spawned <= 0 THEN 64
                ELSE 0
            END,
            wake_at = CASE
                -- A task that awaits its children is ready at once when none
                -- is left (their completions, if any, are in its inbox), or
                -- when a message arrived during the poll that is not the
                -- completion of a child that ended with a result (see
                -- deliver_all); else the last child's completion wakes it.
                WHEN u.action = 'await' THEN
                    CASE WHEN t.live_children + u.spawned <= 0 OR t.next_wakes THEN v_now END
                -- Messages that arrived during the poll make the task ready at once,
                -- and keep it from ending.
                WHEN t.inbox_next_len > 0 THEN v_now
                WHEN u.action = 'done' THEN NULL
                WHEN u.action = 'yield' THEN v_now
                WHEN u.action = 'sleep' THEN u.sleep_at
                WHEN u.action = 'until' THEN u.at
            END,
            done_at = CASE WHEN u.action = 'done' AND t.inbox_next_len = 0 THEN v_now END,
            outcome = CASE WHEN u.action = 'done' AND t.inbox_next_len = 0 THEN 'done' END,
            result = CASE WHEN u.action = 'done' AND t.inbox_next_len = 0 THEN u.result END
        FROM input u
        WHERE t.task_id = u.task_id AND t.claim = u.claim /*citus: AND t.root_id = ANY (v_roots) */
        RETURNING t.task_id, t.root_id, t.parent_id, t.done_at IS NOT NULL AS ended, t.task_type,
            corotask.is_ready(t.claim, t.done_at, t.wake_at, v_now) AS ready,
            u.action = 'done' AND t.done_at IS NULL AS superseded, u.result, u.effects, u.i,
            u.history, u.taken, u.pop_from, u.pop_to, u.action, u.spawned, t.attempts, t.claimed_by, t.claimed_at, t.wake_at,
            -- The state as stored, whose size (and, with history 2, copy)
            -- the history records: pg_column_size, STABLE, is refused in
            -- the RETURNING of a distributed UPDATE.
            t.inner_state AS stored_state
    ), recorded AS (
        INSERT INTO corotask.history (task_id, root_id, attempt, outcome, action, executor_id, claimed_at,
            popped, spawned, sent, state_bytes, state, wake_at)
        SELECT c.task_id, c.root_id, c.attempts, CASE WHEN c.superseded THEN 'superseded' ELSE 'committed' END,
            c.action, c.claimed_by, c.claimed_at,
            CASE WHEN c.superseded THEN 0 ELSE c.taken END,
            CASE WHEN c.superseded THEN 0 ELSE c.spawned END,
            CASE WHEN c.superseded THEN 0 ELSE jsonb_array_length(coalesce(c.effects -> 'send', '[]')) END,
            coalesce(pg_column_size(c.stored_state), 0), CASE WHEN c.history = 2 THEN c.stored_state END, c.wake_at
        FROM committed c WHERE c.history > 0
    ), popped AS (
        DELETE FROM corotask.messages m USING committed c
        WHERE NOT c.superseded AND c.taken > 0
          AND m.task_id = c.task_id AND m.seq BETWEEN c.pop_from AND c.pop_to
          /*citus: AND m.root_id = ANY (v_roots) */
    ), trimmed AS (
        -- A task with fewer attempts than the window has nothing to trim.
        DELETE FROM corotask.history h USING committed c
        WHERE c.history > 0 AND c.attempts > p_keep_first + p_keep_last AND h.task_id = c.task_id
          AND h.attempt > p_keep_first AND h.attempt <= c.attempts - p_keep_last
          AND h.outcome <> 'operator'
          /*citus: AND h.root_id = ANY (v_roots) */
    )
    -- A superseded poll's effects are dropped with it.
    SELECT array_agg(c.task_id ORDER BY c.i), array_agg(c.superseded ORDER BY c.i),
        array_agg(c.task_id ORDER BY c.i) FILTER (WHERE NOT c.superseded AND c.effects IS NOT NULL),
        array_agg(c.effects ORDER BY c.i) FILTER (WHERE NOT c.superseded AND c.effects IS NOT NULL),
        array_agg(c.root_id ORDER BY c.i) FILTER (WHERE NOT c.superseded AND c.effects IS NOT NULL),
        min(c.task_id::text) FILTER (WHERE c.ended AND c.spawned > 0)::uuid,
        array_agg(c.parent_id ORDER BY c.i) FILTER (WHERE c.ended AND c.parent_id IS NOT NULL),
        array_agg(corotask.completion(c.task_id, 'done', c.result, NULL) ORDER BY c.i)
            FILTER (WHERE c.ended AND c.parent_id IS NOT NULL),
        array_agg(c.task_type) FILTER (WHERE c.ready)
    INTO ids, dropped, spawners, effects, spawner_roots, ended_spawner, parents, completions, ready
    FROM committed c;
    RETURN QUERY SELECT u.id, u.d FROM unnest(ids, dropped) AS u(id, d);
    IF cardinality(ready) > 0 THEN
        PERFORM corotask.announce(ready);
    END IF;
    -- Effects are applied per batch, not per poll: every child in one
    -- INSERT, then the messages in batch order (after the children, so that
    -- a poll may message the child it spawned), then the completions to
    -- parents, in batch order.
    IF spawners IS NOT NULL THEN
        -- A child's parent is the task whose poll spawned it: it exists, and
        -- the UPDATE above holds its row until the commit, so no cancel can
        -- end it meanwhile (create_tasks' checks are needed only for parents
        -- outside the transaction). A poll that spawns and ends its task is
        -- refused as create_tasks refuses a child of an ended task.
        IF ended_spawner IS NOT NULL THEN
            RAISE EXCEPTION 'corotask: parent task % has ended', ended_spawner
                USING ERRCODE = 'CT410', DETAIL = 'parent ' || ended_spawner;
        END IF;
        -- Keyed children are checked first, to name the task that holds a
        -- key; a batch without them pays one jsonpath test per poll.
        IF EXISTS (SELECT 1 FROM unnest(effects) AS f(eff) WHERE f.eff @? '$.spawn[*].key') THEN
            PERFORM corotask.refuse_live_keys(array_agg((s.e ->> 'id')::uuid ORDER BY x.k, s.n),
                array_agg(s.e ->> 'type' ORDER BY x.k, s.n), array_agg(s.e ->> 'key' ORDER BY x.k, s.n))
            FROM unnest(effects) WITH ORDINALITY AS x(eff, k),
                 jsonb_array_elements(x.eff -> 'spawn') WITH ORDINALITY AS s(e, n)
            WHERE x.eff ? 'spawn';
        END IF;
        -- Children to create claimed (eager: see p_claimed_by) whose type
        -- has flow controls are created ready instead, and returned
        -- (superseded NULL) so that the executor does not poll them.
        IF p_claimed_by IS NOT NULL AND EXISTS (SELECT 1 FROM unnest(effects) AS f(eff) WHERE f.eff @? '$.spawn[*].claim') THEN
            SELECT coalesce(array_agg(c.task_type), '{}') INTO controlled FROM corotask.type_controls c
            WHERE c.task_type IN (SELECT s.e ->> 'type' FROM unnest(effects) AS f(eff), jsonb_array_elements(f.eff -> 'spawn') AS s(e)
                                  WHERE s.e ? 'claim');
            IF cardinality(controlled) > 0 THEN
                RETURN QUERY SELECT (s.e ->> 'id')::uuid, NULL::boolean
                FROM unnest(effects) AS f(eff), jsonb_array_elements(f.eff -> 'spawn') AS s(e)
                WHERE s.e ? 'claim' AND s.e ->> 'type' = ANY (controlled);
            END IF;
        END IF;
        -- A child with a message has it as its first (seq 1).
        WITH children AS (
            INSERT INTO corotask.tasks (task_id, task_type, parent_id, root_id, inner_state, wake_at, trace,
                claim, heartbeat, claim_expires_at, attempts, claimed_by, claimed_at, msg_seq, inbox_len, task_key, woke,
                priority, limit_key)
            SELECT (s.e ->> 'id')::uuid, s.e ->> 'type', x.parent, x.root, s.e -> 'state', corotask.now(),
                   s.e -> 'trace',
                   c.claim,
                   CASE WHEN c.claim IS NOT NULL THEN now() END,
                   CASE WHEN c.claim IS NOT NULL THEN corotask.now() + make_interval(secs => p_claim_secs) END,
                   CASE WHEN c.claim IS NULL THEN 0 ELSE 1 END,
                   CASE WHEN c.claim IS NOT NULL THEN p_claimed_by END,
                   CASE WHEN c.claim IS NOT NULL THEN now() END,
                   CASE WHEN s.e ? 'msg' THEN 1 ELSE 0 END,
                   CASE WHEN s.e ? 'msg' THEN 1 ELSE 0 END,
                   s.e ->> 'key',
                   -- created, and message when it has one; in the high
                   -- byte when it is created claimed.
                   ((1 | CASE WHEN s.e ? 'msg' THEN 2 ELSE 0 END)
                       << CASE WHEN c.claim IS NULL THEN 0 ELSE 8 END)::smallint,
                   coalesce((s.e ->> 'priority')::smallint, 0), s.e ->> 'limit_key'
            FROM unnest(spawners, effects, spawner_roots) WITH ORDINALITY AS x(parent, eff, root, k),
                 jsonb_array_elements(x.eff -> 'spawn') WITH ORDINALITY AS s(e, n),
                 -- A child of a type with flow controls is never created
                 -- claimed: only a claim, which counts against them, starts
                 -- its polls (the executor knows those types from its last
                 -- claim; one whose controls were set since is caught here).
                 LATERAL (SELECT CASE WHEN p_claimed_by IS NOT NULL AND NOT (s.e ->> 'type' = ANY (controlled))
                                      THEN (s.e ->> 'claim')::uuid END AS claim) c
            WHERE x.eff ? 'spawn'
            ORDER BY x.k, s.n
            RETURNING task_type, corotask.is_ready(claim, done_at, wake_at, corotask.now()) AS ready
        ), first_messages AS (
            INSERT INTO corotask.messages (task_id, root_id, seq, envelope)
            SELECT (s.e ->> 'id')::uuid, x.root, 1, corotask.envelope(x.parent, s.e -> 'msg')
            FROM unnest(spawners, effects, spawner_roots) AS x(parent, eff, root),
                 jsonb_array_elements(x.eff -> 'spawn') AS s(e)
            WHERE x.eff ? 'spawn' AND s.e ? 'msg'
        )
        -- The children created ready (all but those created claimed).
        SELECT array_agg(c.task_type) FILTER (WHERE c.ready) INTO ready FROM children c;
        IF cardinality(ready) > 0 THEN
            PERFORM corotask.announce(ready);
        END IF;
        -- A key that a task ended within its type's key window keeps
        -- (checked after the insert: see key_window_holder).
        IF EXISTS (SELECT 1 FROM unnest(effects) AS f(eff) WHERE f.eff @? '$.spawn[*].key') THEN
            PERFORM corotask.refuse_windowed_keys(array_agg((s.e ->> 'id')::uuid ORDER BY x.k, s.n),
                array_agg(s.e ->> 'type' ORDER BY x.k, s.n), array_agg(s.e ->> 'key' ORDER BY x.k, s.n))
            FROM unnest(effects) WITH ORDINALITY AS x(eff, k),
                 jsonb_array_elements(x.eff -> 'spawn') WITH ORDINALITY AS s(e, n)
            WHERE x.eff ? 'spawn';
        END IF;
        SELECT array_agg((s.e ->> 'to')::uuid ORDER BY x.k, s.n),
               array_agg(corotask.envelope(x.parent, s.e -> 'msg', s.e -> 'trace') ORDER BY x.k, s.n)
        INTO send_to, sent
        FROM unnest(spawners, effects) WITH ORDINALITY AS x(parent, eff, k),
             jsonb_array_elements(x.eff -> 'send') WITH ORDINALITY AS s(e, n)
        WHERE x.eff ? 'send';
        IF send_to IS NOT NULL THEN
            -- A message to a missing or ended task fails the whole batch.
            PERFORM corotask.refuse_undelivered(send_to, ARRAY(SELECT corotask.deliver_all(send_to, sent, v_roots)));
        END IF;
    END IF;
    IF parents IS NOT NULL THEN
        -- A parent that has ended is not told (nothing to tell).
        PERFORM corotask.deliver_all(parents, completions, v_roots);
    END IF;
END
$$;

-- release_claims gives claims back without counting a failure: the tasks are
-- ready for another executor after p_delay (0 for an executor shutting down;
-- an executor that will not poll a task it took back waits a little before
-- trying again). Messages that arrived meanwhile join the inbox. Each
-- release is recorded in the task's history.
CREATE OR REPLACE FUNCTION corotask.release_claims(p_tasks uuid[], p_claims uuid[], p_delay interval)
RETURNS integer
LANGUAGE plpgsql SET search_path = ''
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off AS $$
DECLARE
    n integer;
    ready_types text[];
    -- Read once, not in the UPDATE's CASE (see commit_polls).
    v_now timestamptz := corotask.now();
    v_after timestamptz := corotask.now() + p_delay;
BEGIN
    WITH released AS (
        UPDATE corotask.tasks t SET
            inbox_len = t.inbox_len + t.inbox_next_len,
            inbox_next_len = 0,
            next_wakes = false,
            heartbeat = NULL,
            claim = NULL,
            claim_expires_at = NULL,
            -- The reasons of the claim given back are the next poll's still.
            woke = ((t.woke >> 8) | t.woke) & 127,
            wake_at = CASE WHEN p_delay > interval '0' THEN GREATEST(t.wake_at, v_after)
                           ELSE LEAST(t.wake_at, v_now) END
        FROM unnest(p_tasks, p_claims) AS c(task_id, claim)
        WHERE t.task_id = c.task_id AND t.claim = c.claim
        RETURNING t.task_id, t.root_id, t.attempts, t.claimed_by, t.claimed_at, t.wake_at, t.task_type,
            corotask.is_ready(t.claim, t.done_at, t.wake_at, v_now) AS ready
    ), recorded AS (
        INSERT INTO corotask.history (task_id, root_id, attempt, outcome, executor_id, claimed_at, wake_at)
        SELECT task_id, root_id, attempts, 'released', claimed_by, claimed_at, wake_at FROM released
        ON CONFLICT DO NOTHING
    )
    SELECT count(*)::integer, array_agg(r.task_type) FILTER (WHERE r.ready)
    INTO n, ready_types
    FROM released r;
    IF cardinality(ready_types) > 0 THEN
        PERFORM corotask.announce(ready_types);
    END IF;
    RETURN n;
END
$$;
