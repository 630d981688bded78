-- The SQL API that the Go packages and users' own SQL (functions, triggers)
-- share: creating tasks, sending messages, and what they are built on.
--
-- create_task(s), send_to_task and send_to_key run with the rights of the schema's owner
-- (SECURITY DEFINER, with an empty search_path), so a role that may only send
-- messages or create tasks needs USAGE on the schema and EXECUTE on that
-- function, and no privilege on the table itself. EXECUTE on them is revoked
-- from PUBLIC: grant it per role.
--
-- Errors raised by these functions carry their own SQLSTATEs so that clients
-- can tell them apart: CT404 (no such task), CT410 (task has ended), CT413
-- (message or trace context too large), CT508 (a parent that would make a
-- cycle), 22023 (an invalid task type or key), 23505 on tasks_live_key (a
-- key a live task of the type holds). DETAIL holds "<role> <uuid>" for
-- CT404, CT410, CT508 and 23505 on tasks_live_key (the task that holds the
-- key); for CT413, the body's size in bytes, or "trace <bytes> <limit>" for
-- a trace context.
--
-- The functions that join arrays of task IDs to corotask.tasks run with
-- enable_seqscan, enable_hashjoin and enable_mergejoin off. plpgsql caches a
-- generic plan after a few calls, which guesses the arrays' size; on a table
-- of a few thousand rows or more it then hashes a sequential scan of the whole
-- table where a few index probes would do. Every statement here touches only
-- the rows its arrays name, by task_id, so index probes are always right.

-- now is corotask's clock: the time that decides when a task is due (wake_at),
-- when a claim expires, and when a task ended (done_at, which retention
-- counts from). It is the transaction's now(), unless the session or the
-- transaction set corotask.now (set_config('corotask.now', <timestamptz>,
-- ...)): the test kit's clock (corotasktest.WithClock) sets it on each
-- connection as the pool hands it out.
-- It is inlined where it is called (LANGUAGE sql, STABLE, one expression, no
-- SET): the planner sees current_setting() and now() in place of a call, so
-- `wake_at <= corotask.now()` uses the index on wake_at as `<= now()` does.
-- Audit stamps (claimed_at, heartbeat, a message's "at") and the executors'
-- own expiry stay on now(). It comes first: status() below names it, and a
-- LANGUAGE sql body is checked when it is created.
CREATE OR REPLACE FUNCTION corotask.now() RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT coalesce(nullif(pg_catalog.current_setting('corotask.now', true), '')::pg_catalog.timestamptz,
                    pg_catalog.now())
$$;

-- The largest message body accepted, in bytes of its stored jsonb form.
CREATE OR REPLACE FUNCTION corotask.max_message_bytes() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT 1048576';

-- The largest trace context stored with a message or a task, in bytes of its
-- stored jsonb form. A W3C trace context (traceparent and tracestate) takes
-- well under 1 KiB. With the body's limit it bounds a whole envelope: the
-- rest of it ("from", "at") is of fixed size.
CREATE OR REPLACE FUNCTION corotask.max_trace_bytes() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT 8192';

-- refuse_large_trace raises CT413 for a trace context larger than
-- max_trace_bytes(); p_what names what carries it, for the error.
CREATE OR REPLACE FUNCTION corotask.refuse_large_trace(p_trace jsonb, p_what text) RETURNS void
LANGUAGE plpgsql IMMUTABLE SET search_path = '' AS $$
DECLARE
    size integer := pg_column_size(p_trace);
BEGIN
    IF size > corotask.max_trace_bytes() THEN
        RAISE EXCEPTION 'corotask: trace context of % bytes (of %) is larger than the limit of % bytes',
            size, p_what, corotask.max_trace_bytes()
            USING ERRCODE = 'CT413', DETAIL = 'trace ' || size || ' ' || corotask.max_trace_bytes();
    END IF;
END
$$;

-- controls_lock_key is the key of the advisory lock that orders claims and
-- changes of the flow controls: a claim holds it shared from its first
-- statement (internal/query's ClaimSettings; commit_polls too when it may
-- create children claimed), a change exclusive (control_begin), so that a
-- change waits for the claims in flight and every claim after it sees it.
-- ("corotask" in ASCII; inlined by the planner into a constant.)
CREATE OR REPLACE FUNCTION corotask.controls_lock_key() RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT 7165071355189228395::bigint
$$;

-- rate_limit_tokens is how many tokens the bucket r holds at p_at: those it
-- held at its refill, and rate per per since, up to rate. A time before its
-- refill (a clock moved back) adds none.
CREATE OR REPLACE FUNCTION corotask.rate_limit_tokens(r corotask.rate_limits, p_at timestamptz)
RETURNS float8
LANGUAGE sql IMMUTABLE SET search_path = '' AS $$
    SELECT LEAST(r.rate::float8,
                 r.tokens + GREATEST(0::float8, extract(epoch FROM p_at - r.refilled_at)::float8)
                            * r.rate / extract(epoch FROM r.per)::float8)
$$;

-- type_held says whether the controls c hold back every ready task of their
-- type: it runs its max_running counted claims (counted up to that many, as
-- the claim counts them: until a second after their expiry),
-- or its rate limit has no whole token (the bucket as
-- corotask.rate_limit_tokens computes it). status() below calls it only for
-- a type that has controls.
CREATE OR REPLACE FUNCTION corotask.type_held(c corotask.type_controls) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN c.max_running IS NULL THEN false
                ELSE c.max_running <= (SELECT count(*) FROM (
                         SELECT 1 FROM corotask.tasks r
                         WHERE r.task_type = c.task_type AND r.claim IS NOT NULL AND r.counted
                           AND r.claim_expires_at >= corotask.now() - interval '1 second'
                         LIMIT c.max_running) n) END
        OR EXISTS (SELECT 1 FROM corotask.rate_limits l
                   WHERE l.name = c.rate_limit AND corotask.rate_limit_tokens(l, corotask.now()) < 1)
$$;

-- key_full says whether key p_key runs the maximum of key space p_space:
-- as many running tasks (claims that have not expired) of the space's types
-- with that limit key as its max_running (counted up to that many).
CREATE OR REPLACE FUNCTION corotask.key_full(p_space text, p_key text) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT EXISTS (
        SELECT 1 FROM corotask.key_limits k
        WHERE k.key_space = p_space
          AND k.max_running <= (SELECT count(*) FROM (
                  SELECT 1 FROM corotask.tasks r
                  JOIN corotask.type_controls rc ON rc.task_type = r.task_type AND rc.key_space = k.key_space
                  WHERE r.limit_key = p_key AND r.claim IS NOT NULL AND r.claim_expires_at >= corotask.now() - interval '1 second'
                  LIMIT k.max_running) n))
$$;

-- type_held_now says whether the controls of type p_type, if it has any,
-- hold back every ready task of it, as type_held says of them; and
-- key_full_now whether limit key p_key runs the maximum of the key space of
-- type p_type, if it counts in one, as key_full says. status() calls them.
-- They read the controls into variables first, in plpgsql: on Citus, where
-- the controls are reference tables, a function of a table's row type
-- cannot be called on their rows on a worker (whose rows are of the shard's
-- row type), and a LANGUAGE sql function's statements with parameters are
-- not planned. (type_held and key_full stay for the reads of builds of
-- release 17 and before.)
CREATE OR REPLACE FUNCTION corotask.type_held_now(p_type text) RETURNS boolean
LANGUAGE plpgsql STABLE SET search_path = '' AS $$
DECLARE
    c corotask.type_controls;
    l corotask.rate_limits;
    running bigint;
BEGIN
    SELECT * INTO c FROM corotask.type_controls WHERE task_type = p_type;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF c.max_running IS NOT NULL THEN
        SELECT count(*) INTO running FROM (
            SELECT 1 FROM corotask.tasks r
            WHERE r.task_type = p_type AND r.claim IS NOT NULL AND r.counted
              AND r.claim_expires_at >= corotask.now() - interval '1 second'
            LIMIT c.max_running) n;
        IF running >= c.max_running THEN
            RETURN true;
        END IF;
    END IF;
    SELECT * INTO l FROM corotask.rate_limits WHERE name = c.rate_limit;
    RETURN FOUND AND corotask.rate_limit_tokens(l, corotask.now()) < 1;
END
$$;

CREATE OR REPLACE FUNCTION corotask.key_full_now(p_type text, p_key text) RETURNS boolean
LANGUAGE plpgsql STABLE SET search_path = '' AS $$
DECLARE
    space text;
    most integer;
    types text[];
    running bigint;
BEGIN
    SELECT c.key_space, k.max_running INTO space, most
    FROM corotask.type_controls c JOIN corotask.key_limits k ON k.key_space = c.key_space
    WHERE c.task_type = p_type;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    types := ARRAY(SELECT x.task_type FROM corotask.type_controls x WHERE x.key_space = space);
    SELECT count(*) INTO running FROM (
        SELECT 1 FROM corotask.tasks r
        WHERE r.limit_key = p_key AND r.task_type = ANY (types) AND r.claim IS NOT NULL
          AND r.claim_expires_at >= corotask.now() - interval '1 second'
        LIMIT most) n;
    RETURN running >= most;
END
$$;

-- The derived status of a task, as the Go API and the CLI report it. A task
-- is running exactly when it holds a claim; 'stale' when that claim has
-- expired (its executor died or stalled: another executor will take it
-- over). A task waiting out the backoff of a failed poll is 'retrying', not
-- 'sleeping'. A ready task is 'unserved' when executors have registered in
-- corotask.executors and no live one serves its type (they stopped, died,
-- or serve other types); in a database where none has registered (tasks
-- polled only through PollOnce) it stays 'ready'.
-- A ready task waits on flow control (corotask.type_controls) when its type
-- is paused ('paused', before 'unserved': the pause is why nothing claims
-- it), or, served, when its type runs its max_running counted claims or its
-- rate limit holds no whole token (type_held_now), or its limit_key runs
-- its key space's max_running claims (key_full_now) ('limited'). A task
-- whose type has no type_controls row costs a probe or two of that table's
-- primary key and counts nothing; the counts of a controlled type stop at
-- its limit. internal/query's Status, generated from this CASE, reads the
-- types and keys held back once per statement instead (see Served).
CREATE OR REPLACE FUNCTION corotask.status(t corotask.tasks) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN t.outcome IS NOT NULL THEN t.outcome
        WHEN t.claim IS NOT NULL AND t.claim_expires_at < corotask.now() THEN 'stale'
        WHEN t.claim IS NOT NULL THEN 'running'
        WHEN t.wake_at IS NULL THEN 'suspended'
        WHEN t.wake_at > corotask.now() AND t.failures > 0 THEN 'retrying'
        WHEN t.wake_at > corotask.now() THEN 'sleeping'
        WHEN EXISTS (SELECT 1 FROM corotask.type_controls c WHERE c.task_type = t.task_type AND c.paused_at IS NOT NULL) THEN 'paused'
        WHEN EXISTS (SELECT 1 FROM corotask.executors)
             AND NOT EXISTS (SELECT 1 FROM corotask.executors e
                             WHERE e.expires_at > now() AND t.task_type = ANY (e.task_types)) THEN 'unserved'
        WHEN corotask.type_held_now(t.task_type) THEN 'limited'
        WHEN t.limit_key IS NOT NULL AND corotask.key_full_now(t.task_type, t.limit_key) THEN 'limited'
        ELSE 'ready'
    END
$$;

-- envelope wraps a message body as stored in an inbox, with the time it was
-- sent ("at") and, when there is one, the trace context of its sender
-- ("trace"), refusing an oversized body or trace context: the envelope
-- stored is at most max_message_bytes() + max_trace_bytes() and a few dozen
-- bytes, whoever sends it.
CREATE OR REPLACE FUNCTION corotask.envelope(p_from uuid, p_body jsonb, p_trace jsonb DEFAULT NULL) RETURNS jsonb
LANGUAGE plpgsql STABLE SET search_path = '' AS $$
DECLARE
    size integer := pg_column_size(p_body);
BEGIN
    IF size > corotask.max_message_bytes() THEN
        RAISE EXCEPTION 'corotask: message of % bytes is larger than the limit of % bytes',
            size, corotask.max_message_bytes()
            USING ERRCODE = 'CT413', DETAIL = size::text;
    END IF;
    IF p_trace IS NULL THEN
        RETURN jsonb_build_object('from', p_from, 'body', p_body, 'at', now());
    END IF;
    PERFORM corotask.refuse_large_trace(p_trace, 'a message');
    RETURN jsonb_build_object('from', p_from, 'body', p_body, 'at', now(), 'trace', p_trace);
END
$$;

-- message_digest names a stored message (an inbox entry, its envelope) for
-- drop_message: the first 12 bytes of the SHA-256 of its text, in hex, as
-- tasks.MessageDigest computes it from the envelope Go reads.
CREATE OR REPLACE FUNCTION corotask.message_digest(p_message jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT encode(substr(sha256(convert_to(p_message::text, 'UTF8')), 1, 12), 'hex')
$$;

-- The characters tasks.Type refuses (unicode.IsPrint false) of the general
-- categories Cc (controls), Cf (format characters, such as the bidi
-- overrides), Co (private use), and Zs (but the space), Zl and Zp
-- (separators), as Go's Unicode tables list them. Code points unassigned in
-- Go's tables (Cn), which tasks.Type refuses as well, are not listed: they
-- depend on the Unicode version, and create_tasks must never refuse a type
-- that a newer Go accepts.
CREATE OR REPLACE FUNCTION corotask.unprintable_pattern() RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $pattern$
    SELECT '[\u0001-\u001f\u007f-\u00a0\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u1680\u180e\u2000-\u200f\u2028-\u202f\u205f-\u2064\u2066-\u206f\u3000\ue000-\uf8ff\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f\U000f0000-\U000ffffd\U00100000-\U0010fffd]'
$pattern$;

-- refuse_invalid_types raises 22023 for the first of p_types (of the tasks
-- p_ids) that tasks.Type.Validate refuses: empty, longer than 200 bytes
-- (tasks.MaxTypeLen), with a leading or trailing space, or with a character
-- that is not printable (see unprintable_pattern). A type's characters
-- reach an operator's terminal (corotask ls, show, tree).
CREATE OR REPLACE FUNCTION corotask.refuse_invalid_types(p_ids uuid[], p_types text[]) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = '' AS $$
DECLARE
    pattern text := corotask.unprintable_pattern();
    id uuid;
    typ text;
    shown text;
    bad text;
    joined text := array_to_string(p_types, E'\x01');
BEGIN
    -- At once for the usual call, whose types are all printable ASCII: the
    -- types joined by a character no valid type holds (U+0001), checked by
    -- one expression (no NULL, none empty, none with a space at either end
    -- or longer than 200 bytes, no other character). A call that fails it
    -- is looked at type by type, below.
    IF array_position(p_types, NULL) IS NULL
       AND length(joined) - length(replace(joined, E'\x01', '')) = cardinality(p_types) - 1
       AND NOT (E'\x01' || joined || E'\x01') ~ '[^\x01\x20-\x7e]|\x01\x01|\x01 | \x01|[^\x01]{201}' THEN
        RETURN;
    END IF;
    SELECT u.id, u.typ INTO id, typ FROM unnest(p_ids, p_types) WITH ORDINALITY AS u(id, typ, k)
    WHERE u.typ IS NULL OR u.typ = '' OR octet_length(u.typ) > 200
       OR left(u.typ, 1) = ' ' OR right(u.typ, 1) = ' ' OR u.typ ~ pattern
    ORDER BY u.k LIMIT 1;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF typ IS NULL OR typ = '' THEN
        RAISE EXCEPTION 'corotask: invalid task type of task %: empty', id
            USING ERRCODE = '22023', DETAIL = 'task ' || id;
    END IF;
    -- The type as the error shows it: never a raw control character.
    shown := left(regexp_replace(typ, pattern, '?', 'g'), 40);
    IF octet_length(typ) > 200 THEN
        RAISE EXCEPTION 'corotask: invalid task type "%..." of task %: % bytes, at most 200',
            shown, id, octet_length(typ)
            USING ERRCODE = '22023', DETAIL = 'task ' || id;
    END IF;
    bad := substring(typ FROM pattern);
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'corotask: invalid task type "%" of task %: unprintable character U+% at character %',
            shown, id, upper(lpad(to_hex(ascii(bad)), 4, '0')), strpos(typ, bad)
            USING ERRCODE = '22023', DETAIL = 'task ' || id;
    END IF;
    RAISE EXCEPTION 'corotask: invalid task type "%" of task %: leading or trailing space', shown, id
        USING ERRCODE = '22023', DETAIL = 'task ' || id;
END
$$;

-- refuse_parent_cycle raises CT508 for task p_ids[p_child], whose parent
-- p_parents[p_child] is itself or comes later in p_ids (create_tasks finds
-- it): it would be its own ancestor.
CREATE OR REPLACE FUNCTION corotask.refuse_parent_cycle(p_ids uuid[], p_parents uuid[], p_child integer) RETURNS void
LANGUAGE plpgsql IMMUTABLE SET search_path = '' AS $$
DECLARE
    child uuid := p_ids[p_child];
    j integer := array_position(p_ids, p_parents[p_child]);
BEGIN
    IF j = p_child THEN
        RAISE EXCEPTION 'corotask: task % cannot be its own parent', child
            USING ERRCODE = 'CT508', DETAIL = 'task ' || child;
    END IF;
    IF p_parents[j] = child THEN
        RAISE EXCEPTION 'corotask: tasks % and % would be each other''s parents', child, p_ids[j]
            USING ERRCODE = 'CT508', DETAIL = 'task ' || child,
                  HINT = 'a parent must exist before its child, or come earlier in the same call';
    END IF;
    RAISE EXCEPTION 'corotask: task % has as parent task %, which comes later in the same call', child, p_ids[j]
        USING ERRCODE = 'CT508', DETAIL = 'task ' || child,
              HINT = 'a parent must exist before its child, or come earlier in the same call';
END
$$;

-- deliver_all delivers messages (deliver_one, a single send from outside a
-- poll, follows the same rules): p_envelopes[i] goes to
-- live task p_to[i], in array order per task. Each becomes a row of
-- corotask.messages, numbered after the task's last one (msg_seq), and
-- counts in the task's inbox, or in its inbox_next while an executor holds it
-- (claim IS NOT NULL). The task is woken (wake_at = LEAST(wake_at, corotask.now()),
-- NULL counting as "never"), unless it is waiting out the backoff of a failed
-- poll (failures > 0): its retry sees the messages then. A completion (a
-- child's end, whose envelope has "done") lowers the task's count of live
-- children; a task that awaits its children (awaiting_children) is not woken
-- by the completions of children that ended with a result while that count
-- stays above zero, only by the last one, by a child that failed or was
-- canceled (its completion has "err"), or by another message (next_wakes
-- keeps that fact for a running task's commit). It returns the tasks
-- delivered to; a task missing from them does not exist or has ended.
--
-- A delivery writes the task's row (its counters) and inserts the new
-- message rows: its cost does not depend on how many messages wait.
--
-- p_roots names the trees of the tasks p_to (more trees will do: every
-- caller knows them, the task's own root for a completion to its parent,
-- the roots commit_polls locked for its messages): on a distributed
-- database the UPDATE names them, so that Citus sends it only to the shards
-- that hold them (a filter marked "citus:", made part of the statement
-- there only: see sql/distribute.go); one server does not read them.
DROP FUNCTION IF EXISTS corotask.deliver_all(uuid[], jsonb[]);
CREATE OR REPLACE FUNCTION corotask.deliver_all(p_to uuid[], p_envelopes jsonb[], p_roots uuid[]) RETURNS SETOF uuid
LANGUAGE plpgsql SET search_path = ''
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off
SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    ids uuid[];      -- the tasks delivered to ...
    ready text[];    -- ... and the types of those left ready
    -- The time, read once: a parameter of the statement, not a call in its
    -- CASEs (which Citus refuses in distributed UPDATEs).
    now_at timestamptz := corotask.now();
BEGIN
    -- MATERIALIZED keeps the aggregate from being re-run per row of the join.
    WITH m AS MATERIALIZED (
        SELECT x.task_id, array_agg(x.env ORDER BY x.k) AS envs, count(*)::integer AS n,
               (count(*) FILTER (WHERE x.env ? 'done'))::integer AS ended,
               -- Completions of children that ended with a result: those an
               -- awaiting task does not wake for (a child that failed or was
               -- canceled wakes it, as any other message).
               bool_and(x.env ? 'done' AND NOT x.env ? 'err') AS only_results,
               -- The reasons they give (see tasks.woke): child, message.
               bit_or(CASE WHEN x.env ? 'done' THEN 4 ELSE 2 END)::integer AS woke
        FROM unnest(p_to, p_envelopes) WITH ORDINALITY AS x(task_id, env, k)
        GROUP BY x.task_id
    ), delivered AS (
        UPDATE corotask.tasks t SET
            msg_seq = t.msg_seq + m.n,
            inbox_len = t.inbox_len + CASE WHEN t.claim IS NULL THEN m.n ELSE 0 END,
            inbox_next_len = t.inbox_next_len + CASE WHEN t.claim IS NULL THEN 0 ELSE m.n END,
            next_wakes = t.next_wakes OR (t.claim IS NOT NULL AND NOT m.only_results),
            live_children = GREATEST(t.live_children - m.ended, 0),
            -- A delivery that makes the task due before its timer's time
            -- takes the timer's reason away.
            woke = (t.woke & CASE WHEN t.failures = 0 AND coalesce(t.wake_at > now_at, true)
                                   AND NOT (t.awaiting_children AND m.only_results AND t.live_children - m.ended > 0)
                                  THEN ~8 ELSE ~0 END) | m.woke,
            wake_at = CASE
                WHEN t.failures > 0 THEN t.wake_at
                WHEN t.awaiting_children AND m.only_results AND t.live_children - m.ended > 0 THEN t.wake_at
                ELSE LEAST(t.wake_at, now_at)
            END
        FROM m
        WHERE t.task_id = m.task_id AND t.done_at IS NULL /*citus: AND t.root_id = ANY (p_roots) */
        -- The row as updated: its first new message is numbered after
        -- msg_seq - n.
        RETURNING t.task_id, t.root_id, t.msg_seq - m.n AS base, m.envs, t.task_type,
            corotask.is_ready(t.claim, t.done_at, t.wake_at, now_at) AS ready
    ), stored AS (
        INSERT INTO corotask.messages (task_id, root_id, seq, envelope)
        SELECT d.task_id, d.root_id, d.base + e.k, e.env
        FROM delivered d CROSS JOIN LATERAL unnest(d.envs) WITH ORDINALITY AS e(env, k)
    )
    SELECT array_agg(d.task_id), array_agg(d.task_type) FILTER (WHERE d.ready)
    INTO ids, ready
    FROM delivered d;
    IF cardinality(ready) > 0 THEN
        PERFORM corotask.announce(ready);
    END IF;
    RETURN QUERY SELECT unnest(ids);
END
$$;

-- deliver_one delivers one message that is not a completion (a send from
-- outside a poll: send_to_task, operator_send) as deliver_all would, in two
-- plain statements: the recipient's counters and wake_at, then the message's
-- row. It returns false, and delivers nothing, when the task does not exist
-- or has ended. On a distributed database it reads the task's root first
-- (over every shard, without a lock), so that its writes go to the task's
-- shard alone, not to every shard (filters marked "citus:", as
-- deliver_all's).
CREATE OR REPLACE FUNCTION corotask.deliver_one(p_to uuid, p_envelope jsonb) RETURNS boolean
LANGUAGE plpgsql SET search_path = '' AS $$
DECLARE
    seq bigint;
    root uuid;
    typ text;
    ready boolean;
    now_at timestamptz := corotask.now(); -- read once, as in deliver_all
BEGIN
    /*citus: SELECT r.root_id INTO root FROM corotask.tasks r WHERE r.task_id = p_to; */
    UPDATE corotask.tasks t SET
        msg_seq = t.msg_seq + 1,
        inbox_len = t.inbox_len + CASE WHEN t.claim IS NULL THEN 1 ELSE 0 END,
        inbox_next_len = t.inbox_next_len + CASE WHEN t.claim IS NULL THEN 0 ELSE 1 END,
        next_wakes = t.next_wakes OR t.claim IS NOT NULL,
        -- message; a delivery that makes the task due before its timer's
        -- time takes the timer's reason away (see tasks.woke).
        woke = (t.woke & CASE WHEN t.failures = 0 AND coalesce(t.wake_at > now_at, true)
                              THEN ~8 ELSE ~0 END) | 2,
        wake_at = CASE WHEN t.failures > 0 THEN t.wake_at ELSE LEAST(t.wake_at, now_at) END
    WHERE t.task_id = p_to AND t.done_at IS NULL /*citus: AND t.root_id = root */
    RETURNING t.msg_seq, t.root_id, t.task_type, corotask.is_ready(t.claim, t.done_at, t.wake_at, now_at)
    INTO seq, root, typ, ready;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO corotask.messages (task_id, root_id, seq, envelope) VALUES (p_to, root, seq, p_envelope);
    IF ready THEN
        PERFORM corotask.announce(ARRAY[typ]);
    END IF;
    RETURN true;
END
$$;

-- inbox_window returns the first p_limit messages of a task's inbox (those
-- with a seq above p_after and up to p_upto), in order, with their seqs:
-- what a claim hands its poll (the claim knows from the task's inbox_len
-- whether more wait). It is VOLATILE (plpgsql): its query takes a snapshot
-- of its own, after the claim has locked the task's row. The claim's
-- statement snapshot may predate a send whose row update the claim's lock
-- then waited for or followed: that send's messages are in the window all
-- the same.
CREATE OR REPLACE FUNCTION corotask.inbox_window(p_task uuid, p_after bigint, p_upto bigint, p_limit integer,
    OUT envelopes jsonb[], OUT seqs bigint[])
LANGUAGE plpgsql VOLATILE SET search_path = '' AS $$
BEGIN
    SELECT array_agg(w.envelope ORDER BY w.seq), array_agg(w.seq ORDER BY w.seq)
    INTO envelopes, seqs
    FROM (SELECT m.envelope, m.seq FROM corotask.messages m
          WHERE m.task_id = p_task AND m.seq > p_after AND m.seq <= p_upto
          ORDER BY m.seq
          LIMIT p_limit) w;
END
$$;

-- lock_with_parent locks a task's row and its parent's (which never
-- changes), in task_id order, as commit_polls locks the rows it writes: the
-- functions that end a task or restart one write both, and must neither
-- deadlock with a commit nor let the parent's count of live children miss
-- a child that ends meanwhile (see restart_task).
-- (plpgsql: PERFORM reads every row, where the last SELECT of an sql
-- function may stop at the first.)
CREATE OR REPLACE FUNCTION corotask.lock_with_parent(p_task uuid) RETURNS void
LANGUAGE plpgsql SET search_path = '' AS $$
DECLARE
    root uuid;
    parent uuid;
BEGIN
    -- A task and its parent share their root, which the lock names (see
    -- operator_lock).
    SELECT p.root_id, p.parent_id INTO root, parent FROM corotask.tasks p WHERE p.task_id = p_task;
    PERFORM 1 FROM corotask.tasks t
    WHERE t.root_id = root AND t.task_id IN (p_task, parent)
    ORDER BY t.task_id
    FOR UPDATE;
END
$$;

-- refuse_undelivered raises CT404 or CT410 for the first of p_to that is not
-- in p_delivered: a message is never dropped silently.
CREATE OR REPLACE FUNCTION corotask.refuse_undelivered(p_to uuid[], p_delivered uuid[]) RETURNS void
LANGUAGE plpgsql SET search_path = '' AS $$
DECLARE
    missing uuid;
BEGIN
    SELECT x INTO missing FROM unnest(p_to) WITH ORDINALITY AS u(x, k)
    WHERE x <> ALL (coalesce(p_delivered, '{}')) ORDER BY k LIMIT 1;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF missing IS NULL THEN
        RAISE EXCEPTION 'corotask: a message needs a task id to go to' USING ERRCODE = '22004';
    END IF;
    IF EXISTS (SELECT 1 FROM corotask.tasks WHERE task_id = missing) THEN
        RAISE EXCEPTION 'corotask: task % has ended', missing
            USING ERRCODE = 'CT410', DETAIL = 'task ' || missing;
    END IF;
    RAISE EXCEPTION 'corotask: task % not found', missing
        USING ERRCODE = 'CT404', DETAIL = 'task ' || missing;
END
$$;

-- refuse_invalid_keys raises 22023 for the first of p_keys (of the tasks
-- p_ids; NULL: no key) that tasks.ValidateKey refuses: empty, longer than
-- 200 bytes (tasks.MaxKeyLen), or with a control character (U+0001 to
-- U+001F, U+007F to U+009F). The table's CHECK (tasks_key_valid) refuses
-- the same; this says which task and why.
CREATE OR REPLACE FUNCTION corotask.refuse_invalid_keys(p_ids uuid[], p_keys text[]) RETURNS void
LANGUAGE plpgsql IMMUTABLE SET search_path = '' AS $$
DECLARE
    id uuid;
    key text;
    bad text;
BEGIN
    SELECT u.id, u.key INTO id, key FROM unnest(p_ids, p_keys) WITH ORDINALITY AS u(id, key, k)
    WHERE u.key = '' OR octet_length(u.key) > 200 OR u.key ~ '[\x01-\x1f\x7f-\x9f]'
    ORDER BY u.k LIMIT 1;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF key = '' THEN
        RAISE EXCEPTION 'corotask: invalid task key of task %: empty', id
            USING ERRCODE = '22023', DETAIL = 'task ' || id;
    END IF;
    IF octet_length(key) > 200 THEN
        RAISE EXCEPTION 'corotask: invalid task key "%..." of task %: % bytes, at most 200',
            left(regexp_replace(key, '[\x01-\x1f\x7f-\x9f]', '?', 'g'), 40), id, octet_length(key)
            USING ERRCODE = '22023', DETAIL = 'task ' || id;
    END IF;
    bad := substring(key FROM '[\x01-\x1f\x7f-\x9f]');
    RAISE EXCEPTION 'corotask: invalid task key "%" of task %: control character U+% at character %',
        regexp_replace(key, '[\x01-\x1f\x7f-\x9f]', '?', 'g'), id,
        upper(lpad(to_hex(ascii(bad)), 4, '0')), strpos(key, bad)
        USING ERRCODE = '22023', DETAIL = 'task ' || id;
END
$$;

-- refuse_taken_key raises 23505 (unique_violation, on the index
-- tasks_live_key) for a task of type p_type with key p_key that could not
-- be created because a live task has that type and key: its message and
-- DETAIL ("task <uuid>") name that task, which tasks.ExistsError reports.
-- The holder is looked up by a statement of its own, whose snapshot sees a
-- holder that a concurrent transaction committed meanwhile.
CREATE OR REPLACE FUNCTION corotask.refuse_taken_key(p_type text, p_key text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = '' AS $$
DECLARE
    holder uuid;
BEGIN
    SELECT t.task_id INTO holder FROM corotask.tasks t
    WHERE t.task_type = p_type AND t.task_key = p_key AND t.done_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'corotask: a live task of type "%" has key "%" already', p_type, p_key
            USING ERRCODE = '23505', CONSTRAINT = 'tasks_live_key';
    END IF;
    RAISE EXCEPTION 'corotask: a live task of type "%" has key "%" already: task %', p_type, p_key, holder
        USING ERRCODE = '23505', CONSTRAINT = 'tasks_live_key', DETAIL = 'task ' || holder;
END
$$;

-- refuse_skipped_tasks raises for the first task of p_ids (with p_types and
-- p_keys) that create_tasks did not create (it is not in p_made): one whose
-- ID a task has already (23505 on tasks_pkey, as the insert without keys
-- raises it: a retried create), or else one whose key a live task holds, or
-- another of the same call created before it (through refuse_taken_key).
CREATE OR REPLACE FUNCTION corotask.refuse_skipped_tasks(p_ids uuid[], p_types text[], p_keys text[], p_made uuid[])
RETURNS void
LANGUAGE plpgsql STABLE SET search_path = '' AS $$
DECLARE
    skipped uuid;
    typ text;
    key text;
BEGIN
    SELECT u.id, u.typ, u.key INTO skipped, typ, key
    FROM unnest(p_ids, p_types, p_keys) WITH ORDINALITY AS u(id, typ, key, k)
    WHERE u.id <> ALL (p_made)
    ORDER BY u.k LIMIT 1;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM corotask.tasks t WHERE t.task_id = skipped) THEN
        RAISE EXCEPTION 'duplicate key value violates unique constraint "tasks_pkey"'
            USING ERRCODE = '23505', CONSTRAINT = 'tasks_pkey',
                  DETAIL = 'Key (task_id)=(' || skipped || ') already exists.';
    END IF;
    PERFORM corotask.refuse_taken_key(typ, key);
END
$$;

-- lock_keys takes a transaction advisory lock for each distinct type and
-- key of p_types and p_keys (NULL: no key), in one order, so that callers
-- that share keys never deadlock. On Citus (the database's
-- corotask.distributed is on) tasks are distributed by their tree's root,
-- and no unique index can hold the live keys (tasks_live_key is dropped):
-- every creator of a keyed task (create_tasks, the keyed children of
-- commit_polls, send_to_key, restart_task) takes these locks on the
-- coordinator before it looks for a live task with the key, through
-- refuse_live_keys, so two of them never both find none. The two-integer
-- form of the lock keeps these apart from corotask's other advisory lock
-- (controls_lock_key, a bigint). The look after the lock needs a snapshot
-- taken after it, which READ COMMITTED gives each statement: under
-- REPEATABLE READ or SERIALIZABLE it raises 0A000 instead.
CREATE OR REPLACE FUNCTION corotask.lock_keys(p_types text[], p_keys text[]) RETURNS void
LANGUAGE plpgsql VOLATILE SET search_path = '' AS $$
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'corotask: a task with a key is created on Citus only in a READ COMMITTED transaction, not %',
            upper(current_setting('transaction_isolation'))
            USING ERRCODE = '0A000',
                  HINT = 'no unique index holds the live keys of a distributed database: creators of a key take turns under a lock, and each needs to see what the one before committed';
    END IF;
    PERFORM pg_catalog.pg_advisory_xact_lock(l.a, l.b) FROM (
        SELECT DISTINCT pg_catalog.hashtext(u.typ) AS a, pg_catalog.hashtext(u.key) AS b
        FROM unnest(p_types, p_keys) AS u(typ, key) WHERE u.key IS NOT NULL
        ORDER BY 1, 2) l;
END
$$;

-- refuse_live_keys raises 23505 for the first of the tasks p_ids (with
-- p_types and p_keys; NULL: no key) whose type and key a live task holds
-- (see refuse_taken_key), or an earlier task of p_ids: commit_polls checks
-- its keyed children with it before it creates them, and restart_task the
-- key of the task it brings back. (Two commits that create the same key at
-- once both pass it; the second then meets the unique index itself.) On
-- Citus, which has no such index, it first takes the keys' locks
-- (lock_keys), and create_tasks calls it too: it is VOLATILE so that its
-- look takes a snapshot after the locks.
CREATE OR REPLACE FUNCTION corotask.refuse_live_keys(p_ids uuid[], p_types text[], p_keys text[]) RETURNS void
LANGUAGE plpgsql VOLATILE SET search_path = '' AS $$
DECLARE
    typ text;
    key text;
    id uuid;
    earlier uuid;
    live_types text[];
    live_keys text[];
BEGIN
    IF current_setting('corotask.distributed', true) = 'on' THEN
        PERFORM corotask.lock_keys(p_types, p_keys);
    END IF;
    -- The live tasks with these types and keys, read apart from the
    -- arrays: Citus refuses a correlated subquery on a distributed table
    -- beside unnest().
    SELECT array_agg(t.task_type), array_agg(t.task_key) INTO live_types, live_keys
    FROM corotask.tasks t
    WHERE t.task_type = ANY (p_types) AND t.task_key = ANY (p_keys) AND t.done_at IS NULL;
    SELECT u.typ, u.key, u.id, e.id INTO typ, key, id, earlier
    FROM unnest(p_ids, p_types, p_keys) WITH ORDINALITY AS u(id, typ, key, k)
    LEFT JOIN LATERAL (SELECT e.id FROM unnest(p_ids, p_types, p_keys) WITH ORDINALITY AS e(id, typ, key, k)
                       WHERE e.k < u.k AND e.typ = u.typ AND e.key = u.key ORDER BY e.k LIMIT 1) e ON true
    WHERE u.key IS NOT NULL AND (e.id IS NOT NULL OR EXISTS (
        SELECT 1 FROM unnest(live_types, live_keys) AS l(typ, key) WHERE l.typ = u.typ AND l.key = u.key))
    ORDER BY u.k LIMIT 1;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF earlier IS NOT NULL THEN
        RAISE EXCEPTION 'corotask: tasks % and % of type "%" have the same key "%"', earlier, id, typ, key
            USING ERRCODE = '23505', CONSTRAINT = 'tasks_live_key', DETAIL = 'task ' || earlier;
    END IF;
    PERFORM corotask.refuse_taken_key(typ, key);
END
$$;

-- key_window_holder finds, for the first of the keyed tasks p_types and
-- p_keys (NULL: no key; k is its place, from 1) whose type has a key window
-- (corotask.key_windows), a task of that type with that key that ended
-- within the window (holder, with its done_at and the window): the last to
-- end. It returns no row when there is none, and reads key_windows only
-- for tasks with a key. Its callers run it after they insert the keyed
-- tasks: an insert waits, on the unique index of live keys, for a
-- concurrent transaction that ends the key's task, and the next statement
-- (READ COMMITTED) sees that end, so two creates racing the end of a key's
-- task cannot both pass; it takes no lock (a lock here made creates and
-- sends deadlock with the commits and deliveries that end or update the
-- same tasks).
CREATE OR REPLACE FUNCTION corotask.key_window_holder(p_types text[], p_keys text[],
    OUT k integer, OUT holder uuid, OUT ended_at timestamptz, OUT keep interval)
LANGUAGE plpgsql VOLATILE SET search_path = ''
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM unnest(p_types, p_keys) AS u(typ, key)
                   JOIN corotask.key_windows w ON w.task_type = u.typ WHERE u.key IS NOT NULL) THEN
        RETURN;
    END IF;
    -- Only ended tasks count: it runs after the insert it guards (a task
    -- just created is live), whose wait on the unique index of live keys
    -- saw any concurrent end of the key's task commit, so that this
    -- statement's snapshot sees that end. It locks nothing.
    SELECT u.k::integer, t.task_id, t.done_at, w.keep INTO k, holder, ended_at, keep
    FROM unnest(p_types, p_keys) WITH ORDINALITY AS u(typ, key, k)
    JOIN corotask.key_windows w ON w.task_type = u.typ
    JOIN corotask.tasks t ON t.task_key = u.key AND t.task_type = u.typ
    WHERE u.key IS NOT NULL AND t.done_at IS NOT NULL AND t.done_at > corotask.now() - w.keep
    ORDER BY u.k, t.done_at DESC
    LIMIT 1;
END
$$;

-- refuse_windowed_keys raises 23505 (DETAIL "task <uuid>") for the first of
-- the tasks p_ids (with p_types and p_keys) whose key a task of its type
-- that ended within the type's key window still holds (see
-- key_window_holder): create_tasks and commit_polls check their keyed
-- tasks with it before they insert them.
CREATE OR REPLACE FUNCTION corotask.refuse_windowed_keys(p_ids uuid[], p_types text[], p_keys text[]) RETURNS void
LANGUAGE plpgsql VOLATILE SET search_path = '' AS $$
DECLARE
    w record;
BEGIN
    SELECT * INTO w FROM corotask.key_window_holder(p_types, p_keys);
    IF w.holder IS NULL THEN
        RETURN;
    END IF;
    RAISE EXCEPTION 'corotask: task % of type "%" with key "%" ended at %, within its type''s key window of %',
        w.holder, p_types[w.k], p_keys[w.k], w.ended_at, w.keep
        USING ERRCODE = '23505', CONSTRAINT = 'key_windows', DETAIL = 'task ' || w.holder;
END
$$;

-- new_task_id returns a new task ID: a ULID (the milliseconds of the clock
-- in its first 6 bytes, then 10 random bytes) as a uuid, as tasks.NewID
-- makes them, for tasks that SQL creates without one (send_to_key).
CREATE OR REPLACE FUNCTION corotask.new_task_id() RETURNS uuid
LANGUAGE sql VOLATILE PARALLEL SAFE SET search_path = '' AS $$
    SELECT encode(overlay(uuid_send(gen_random_uuid())
        PLACING substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
        FROM 1 FOR 6), 'hex')::uuid
$$;

-- create_tasks inserts many tasks in one statement. Each array holds one element
-- per task; parents must exist and not have ended, or be created earlier in
-- the same call: a task that names itself or a later task of the call as
-- parent is refused (CT508), as it would be its own ancestor (existing tasks
-- cannot have a new one as parent, so no other cycle can form). Types
-- follow the rules of tasks.Type (22023 otherwise: see
-- refuse_invalid_types). A task with a message gets it as its first inbox
-- entry, from its parent. p_traces holds the trace context of the code that
-- created each task (NULL: none; at most max_trace_bytes() each); the forms
-- without it create tasks with none. p_keys holds each task's key (NULL:
-- none; see refuse_invalid_keys); a key that a live task of the same type
-- holds, or that an earlier task of the call takes, is refused with 23505
-- naming the task that holds it (see refuse_taken_key), as is a key that a
-- task of the type ended within the type's key window (see
-- refuse_windowed_keys). The forms without p_keys create tasks without keys.
-- p_priorities holds each task's priority (NULL: 0; see tasks.priority) and
-- p_limit_keys its key in its type's key space (NULL: none; see
-- tasks.limit_key); the forms without them create tasks of priority 0 and
-- no limit key.
CREATE OR REPLACE FUNCTION corotask.create_tasks(
    p_ids      uuid[],
    p_types    text[],
    p_parents  uuid[],
    p_states   jsonb[],
    p_messages jsonb[],
    p_wake_ats timestamptz[],
    p_traces   jsonb[],
    p_keys     text[],
    p_priorities smallint[],
    p_limit_keys text[]
) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ''
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off
-- The walk down a call's trees is estimated far above what it costs (a
-- recursive query is guessed to grow tenfold at each level): JIT would
-- compile it, for 200 ms a call, to run it in 1 ms.
SET jit = off AS $$
DECLARE
    bad uuid;
    outside uuid[];  -- the parents not created in this call, by first child ...
    live uuid[];     -- ... those found, and not ended ...
    live_roots uuid[]; -- ... and their root_ids ...
    ended uuid[];    -- ... and those that have ended
    cycle integer;   -- the first task whose parent comes later in the call, or is itself
    roots uuid[] := p_ids; -- each task's root_id: its own ID, or its parent's root_id
    parents_ready text[]; -- the types of the parents left ready
    parent_roots uuid[]; -- the roots of the parents outside the call
    now_at timestamptz := corotask.now(); -- a parameter, not a call, where Citus refuses one
    trace jsonb;
    made uuid[];     -- the tasks a call with keys created
BEGIN
    PERFORM corotask.refuse_invalid_types(p_ids, p_types);
    IF p_traces IS NOT NULL THEN
        -- Callers pass one trace context for every task: check each once.
        FOR trace IN SELECT DISTINCT x FROM unnest(p_traces) AS x WHERE x IS NOT NULL LOOP
            PERFORM corotask.refuse_large_trace(trace, 'a task');
        END LOOP;
    END IF;
    -- A call whose keys are all NULL takes the path without keys.
    IF p_keys IS NOT NULL AND EXISTS (SELECT 1 FROM unnest(p_keys) AS k WHERE k IS NOT NULL) THEN
        PERFORM corotask.refuse_invalid_keys(p_ids, p_keys);
    ELSE
        p_keys := NULL;
    END IF;
    IF p_priorities IS NOT NULL THEN
        SELECT u.id, u.p INTO bad, cycle FROM unnest(p_ids, p_priorities) AS u(id, p) WHERE u.p < 0 LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'corotask: task %: priority % is negative (0 is the default and the lowest)', bad, cycle
                USING ERRCODE = '22023';
        END IF;
    END IF;
    IF p_limit_keys IS NOT NULL THEN
        PERFORM corotask.refuse_invalid_keys(p_ids, p_limit_keys);
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_parents) AS p WHERE p IS NOT NULL) THEN
        -- Each parent once, with its first child (k) and its place in p_ids
        -- (j, NULL when it is not created in this call): one search of p_ids
        -- per distinct parent.
        SELECT coalesce(array_agg(f.p ORDER BY f.k) FILTER (WHERE f.j IS NULL), '{}'),
               min(f.k) FILTER (WHERE f.j >= f.k)
        INTO outside, cycle
        FROM (SELECT u.p, min(u.k)::integer AS k, array_position(p_ids, u.p) AS j
              FROM unnest(p_parents) WITH ORDINALITY AS u(p, k)
              WHERE u.p IS NOT NULL GROUP BY u.p) f;
        IF cycle IS NOT NULL THEN
            PERFORM corotask.refuse_parent_cycle(p_ids, p_parents, cycle);
        END IF;
        -- One statement finds the parents that exist and locks them: the
        -- lock waits for a concurrent cancel of a parent, so a child is
        -- never added under a parent that is being canceled. It is the lock
        -- of the UPDATE of their count of children below, taken at once
        -- (FOR SHARE, which two callers may hold together, would make them
        -- deadlock when both raise it).
        IF cardinality(outside) > 0 THEN
            -- The lock names the parents' roots (see operator_lock): one
            -- root, the common case (children of one workflow), as a value,
            -- which Citus routes to one shard.
            SELECT array_agg(DISTINCT t.root_id) INTO parent_roots
            FROM corotask.tasks t WHERE t.task_id = ANY (outside);
            IF cardinality(parent_roots) = 1 THEN
                PERFORM 1 FROM corotask.tasks t
                WHERE t.task_id = ANY (outside) AND t.root_id = parent_roots[1]
                ORDER BY t.task_id FOR NO KEY UPDATE;
            ELSE
                PERFORM 1 FROM corotask.tasks t
                WHERE t.task_id = ANY (outside)
                ORDER BY t.task_id FOR NO KEY UPDATE;
            END IF;
            -- The rows as locked (a read after the lock sees the version it
            -- waited for).
            SELECT coalesce(array_agg(t.task_id) FILTER (WHERE t.done_at IS NULL), '{}'),
                   coalesce(array_agg(t.root_id) FILTER (WHERE t.done_at IS NULL), '{}'),
                   coalesce(array_agg(t.task_id) FILTER (WHERE t.done_at IS NOT NULL), '{}')
            INTO live, live_roots, ended
            FROM corotask.tasks t WHERE t.task_id = ANY (outside);
            SELECT o.p INTO bad FROM unnest(outside) WITH ORDINALITY AS o(p, n)
            WHERE o.p <> ALL (live) AND o.p <> ALL (ended)
            ORDER BY o.n LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION 'corotask: parent task % not found', bad
                    USING ERRCODE = 'CT404', DETAIL = 'parent ' || bad;
            END IF;
            IF cardinality(ended) > 0 THEN
                bad := ended[1];
                RAISE EXCEPTION 'corotask: parent task % has ended', bad
                    USING ERRCODE = 'CT410', DETAIL = 'parent ' || bad;
            END IF;
        END IF;
        -- A child is in its parent's tree: it takes the root_id of its
        -- parent, one of those locked above or one created earlier in this
        -- call, walked down from the tasks whose root is known. Hash joins,
        -- which this function turns off for its other statements, keep it
        -- linear in the size of the call.
        PERFORM set_config('enable_hashjoin', 'on', true);
        WITH RECURSIVE batch AS MATERIALIZED (
            SELECT u.id, u.p, u.k FROM unnest(p_ids, p_parents) WITH ORDINALITY AS u(id, p, k)
        ), known AS (
            SELECT b.id, coalesce(o.root, b.id) AS root
            FROM batch b LEFT JOIN unnest(live, live_roots) AS o(id, root) ON o.id = b.p
            WHERE b.p IS NULL OR o.id IS NOT NULL
            UNION ALL
            SELECT c.id, known.root FROM known JOIN batch c ON c.p = known.id
        )
        SELECT array_agg(r.root ORDER BY b.k) INTO roots
        FROM batch b LEFT JOIN (SELECT DISTINCT ON (id) id, root FROM known) r ON r.id = b.id;
        PERFORM set_config('enable_hashjoin', 'off', true);
    END IF;
    IF p_keys IS NULL THEN
        WITH created AS (
            INSERT INTO corotask.tasks (task_id, task_type, parent_id, root_id, inner_state, wake_at, trace,
                msg_seq, inbox_len, woke, priority, limit_key)
            SELECT u.id, u.typ, u.parent, u.root, u.state, coalesce(u.wake_at, corotask.now()), u.trace,
                   CASE WHEN u.msg IS NULL THEN 0 ELSE 1 END, CASE WHEN u.msg IS NULL THEN 0 ELSE 1 END,
                   CASE WHEN u.msg IS NULL THEN 1 ELSE 3 END, -- created (see tasks.woke), message
                   coalesce(u.priority, 0), u.limit_key
            FROM unnest(p_ids, p_types, p_parents, p_states, p_messages, p_wake_ats, p_traces, p_priorities, p_limit_keys,
                        roots)
                AS u(id, typ, parent, state, msg, wake_at, trace, priority, limit_key, root)
        )
        INSERT INTO corotask.messages (task_id, root_id, seq, envelope)
        SELECT u.id, u.root, 1, corotask.envelope(u.parent, u.msg)
        FROM unnest(p_ids, p_parents, p_messages, roots) AS u(id, parent, msg, root)
        WHERE u.msg IS NOT NULL;
    ELSE
        -- With keys, a task whose key a live task of its type holds (or an
        -- earlier task of the call) is skipped by the insert, which waits
        -- for a concurrent transaction that inserts the same key to end,
        -- and then refused, naming the holder. Only calls with keys pay for
        -- the speculative insert. On Citus no unique index holds the live
        -- keys: the keys are locked and looked up first (refuse_live_keys),
        -- and the insert skips only a task whose ID is taken. The insert
        -- names no index, so that it runs on both.
        IF current_setting('corotask.distributed', true) = 'on' THEN
            PERFORM corotask.refuse_live_keys(p_ids, p_types, p_keys);
        END IF;
        WITH inserted AS (
            INSERT INTO corotask.tasks (task_id, task_type, parent_id, root_id, inner_state, wake_at, trace,
                msg_seq, inbox_len, task_key, woke, priority, limit_key)
            SELECT u.id, u.typ, u.parent, u.root, u.state, coalesce(u.wake_at, corotask.now()), u.trace,
                   CASE WHEN u.msg IS NULL THEN 0 ELSE 1 END, CASE WHEN u.msg IS NULL THEN 0 ELSE 1 END, u.key,
                   CASE WHEN u.msg IS NULL THEN 1 ELSE 3 END, -- created (see tasks.woke), message
                   coalesce(u.priority, 0), u.limit_key
            FROM unnest(p_ids, p_types, p_parents, p_states, p_messages, p_wake_ats, p_traces, p_keys,
                        p_priorities, p_limit_keys, roots)
                AS u(id, typ, parent, state, msg, wake_at, trace, key, priority, limit_key, root)
            ON CONFLICT DO NOTHING
            RETURNING task_id
        )
        SELECT array_agg(task_id) INTO made FROM inserted;
        IF coalesce(cardinality(made), 0) < cardinality(p_ids) THEN
            PERFORM corotask.refuse_skipped_tasks(p_ids, p_types, p_keys, coalesce(made, '{}'));
        END IF;
        -- Then a key that a task ended within its type's key window keeps
        -- (checked after the insert: see key_window_holder).
        PERFORM corotask.refuse_windowed_keys(p_ids, p_types, p_keys);
        INSERT INTO corotask.messages (task_id, root_id, seq, envelope)
        SELECT u.id, u.root, 1, corotask.envelope(u.parent, u.msg)
        FROM unnest(p_ids, p_parents, p_messages, roots) AS u(id, parent, msg, root)
        WHERE u.msg IS NOT NULL;
    END IF;
    -- Each parent counts its live children (see deliver_all). The parents
    -- outside the call were locked from the start, so a claim may have
    -- skipped one: those left ready are announced with the new tasks.
    IF outside IS NOT NULL THEN
        WITH counted AS (
            UPDATE corotask.tasks t SET live_children = t.live_children + c.n
            FROM (SELECT p, count(*)::integer AS n FROM unnest(p_parents) AS p WHERE p IS NOT NULL GROUP BY p) c
            WHERE t.task_id = c.p
            RETURNING t.task_type, corotask.is_ready(t.claim, t.done_at, t.wake_at, now_at) AS ready
        )
        SELECT array_agg(DISTINCT c.task_type) FILTER (WHERE c.ready) INTO parents_ready FROM counted c;
        PERFORM corotask.announce(parents_ready);
    END IF;
    -- The tasks created ready (no wake_at: now), each type once.
    PERFORM corotask.announce(ARRAY(
        SELECT DISTINCT u.typ FROM unnest(p_types, p_wake_ats) AS u(typ, wake_at)
        WHERE u.wake_at IS NULL OR u.wake_at <= corotask.now()));
END
$$;

CREATE OR REPLACE FUNCTION corotask.create_tasks(
    p_ids      uuid[],
    p_types    text[],
    p_parents  uuid[],
    p_states   jsonb[],
    p_messages jsonb[],
    p_wake_ats timestamptz[],
    p_traces   jsonb[],
    p_keys     text[]
) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = '' AS $$
    SELECT corotask.create_tasks(p_ids, p_types, p_parents, p_states, p_messages, p_wake_ats, p_traces, p_keys,
        NULL::smallint[], NULL::text[])
$$;

CREATE OR REPLACE FUNCTION corotask.create_tasks(
    p_ids      uuid[],
    p_types    text[],
    p_parents  uuid[],
    p_states   jsonb[],
    p_messages jsonb[],
    p_wake_ats timestamptz[],
    p_traces   jsonb[]
) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = '' AS $$
    SELECT corotask.create_tasks(p_ids, p_types, p_parents, p_states, p_messages, p_wake_ats, p_traces, NULL::text[],
        NULL::smallint[], NULL::text[])
$$;

CREATE OR REPLACE FUNCTION corotask.create_tasks(
    p_ids      uuid[],
    p_types    text[],
    p_parents  uuid[],
    p_states   jsonb[],
    p_messages jsonb[],
    p_wake_ats timestamptz[]
) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = '' AS $$
    SELECT corotask.create_tasks(p_ids, p_types, p_parents, p_states, p_messages, p_wake_ats, NULL::jsonb[], NULL::text[],
        NULL::smallint[], NULL::text[])
$$;

-- create_task creates one task; see create_tasks. p_wake_at NULL means now.
CREATE OR REPLACE FUNCTION corotask.create_task(
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

-- send_to_task sends a message to a task, from another task or (p_from NULL) from
-- outside any task. It raises CT404 for an unknown task and CT410 for an ended one.
-- p_trace, the trace context of the sender, is kept in the message's envelope;
-- the form without it sends a message with none.
CREATE OR REPLACE FUNCTION corotask.send_to_task(p_to uuid, p_from uuid, p_message jsonb, p_trace jsonb) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = '' AS $$
BEGIN
    IF p_to IS NULL THEN
        RAISE EXCEPTION 'corotask: send_to_task needs a task id' USING ERRCODE = '22004';
    END IF;
    IF NOT corotask.deliver_one(p_to, corotask.envelope(p_from, p_message, p_trace)) THEN
        PERFORM corotask.refuse_undelivered(ARRAY[p_to], '{}');
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION corotask.send_to_task(p_to uuid, p_from uuid, p_message jsonb) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = '' AS $$
    SELECT corotask.send_to_task(p_to, p_from, p_message, NULL::jsonb)
$$;

-- send_to_key sends a message to the live task of type p_type with key
-- p_key, creating it first when there is none: with initial state p_state
-- (NULL: the poller's zero value) and the message as its first inbox entry.
-- It returns the task's ID. p_trace, the trace context of the sender, is
-- kept in the message's envelope (and with a task it creates). It runs in
-- the caller's transaction, so a trigger may call it: the rows a
-- transaction changes become messages to the tasks they concern, sent if
-- and only if it commits.
--
-- Concurrent callers with a new key create one task between them, and
-- every message reaches it: a caller that finds no live task inserts one,
-- ON CONFLICT on the unique index of live keys (tasks_live_key), which
-- waits for a concurrent insert of the same key to commit or roll back (on
-- Citus, which has no such index, it takes the key's lock and looks again
-- first: see lock_keys); a
-- caller whose insert conflicted, or whose task ended before its message
-- was delivered (deliver_one refuses an ended task), looks again, with a
-- fresh snapshot (READ COMMITTED). Under REPEATABLE READ or SERIALIZABLE a
-- caller that raced another fails with a serialization failure (40001), to
-- be retried as such.
--
-- When no task of the type with the key is live but one ended within the
-- type's key window (see key_window_holder), it creates nothing and raises
-- CT410 naming that task, as send_to_task does for an ended task.
--
-- It raises 22023 for an invalid type or key (see refuse_invalid_types and
-- refuse_invalid_keys), and CT413 for a message or trace context too large.
CREATE OR REPLACE FUNCTION corotask.send_to_key(
    p_type    text,
    p_key     text,
    p_message jsonb,
    p_state   jsonb DEFAULT NULL,
    p_trace   jsonb DEFAULT NULL
) RETURNS uuid
LANGUAGE plpgsql SECURITY DEFINER SET search_path = '' AS $$
DECLARE
    id uuid;
    new_id uuid;
    w record;
    env jsonb := corotask.envelope(NULL, p_message, p_trace);
    locked boolean := false;
BEGIN
    IF p_key IS NULL THEN
        RAISE EXCEPTION 'corotask: send_to_key needs a key' USING ERRCODE = '22004';
    END IF;
    -- Each round either delivers, creates, or finds that another caller
    -- changed the key's task meanwhile (created it, or ended it), which a
    -- caller in READ COMMITTED sees in the next round.
    FOR round IN 1..100 LOOP
        SELECT t.task_id INTO id FROM corotask.tasks t
        WHERE t.task_type = p_type AND t.task_key = p_key AND t.done_at IS NULL;
        IF FOUND THEN
            IF corotask.deliver_one(id, env) THEN
                RETURN id;
            END IF;
            CONTINUE; -- it ended meanwhile: the key is free
        END IF;
        -- On Citus, where no unique index holds the live keys, a caller
        -- takes the key's lock (lock_keys) before it may create, and looks
        -- again under it: creators of the key take turns.
        IF NOT locked AND current_setting('corotask.distributed', true) = 'on' THEN
            PERFORM corotask.lock_keys(ARRAY[p_type], ARRAY[p_key]);
            locked := true;
            CONTINUE;
        END IF;
        IF new_id IS NULL THEN
            -- Checked once, when it first may create a task (in a later
            -- round too, when the key's task ended while it sent).
            new_id := corotask.new_task_id();
            PERFORM corotask.refuse_invalid_types(ARRAY[new_id], ARRAY[p_type]);
            PERFORM corotask.refuse_invalid_keys(ARRAY[new_id], ARRAY[p_key]);
            IF p_trace IS NOT NULL THEN
                PERFORM corotask.refuse_large_trace(p_trace, 'a task');
            END IF;
        END IF;
        -- Within its type's key window, the key's ended task keeps it: the
        -- message is refused as one to an ended task is.
        SELECT * INTO w FROM corotask.key_window_holder(ARRAY[p_type], ARRAY[p_key]);
        IF w.holder IS NOT NULL THEN
            RAISE EXCEPTION 'corotask: task % of type "%" with key "%" has ended', w.holder, p_type, p_key
                USING ERRCODE = 'CT410', DETAIL = 'task ' || w.holder,
                      HINT = format('it ended at %s, within its type''s key window of %s', w.ended_at, w.keep);
        END IF;
        INSERT INTO corotask.tasks (task_id, task_type, root_id, inner_state, wake_at, trace, msg_seq, inbox_len, task_key, woke)
        VALUES (new_id, p_type, new_id, p_state, corotask.now(), p_trace, 1, 1, p_key, 3) -- created, message
        ON CONFLICT DO NOTHING -- names no index: Citus has no tasks_live_key
        RETURNING task_id INTO id;
        IF FOUND THEN
            INSERT INTO corotask.messages (task_id, root_id, seq, envelope) VALUES (id, id, 1, env);
            PERFORM corotask.announce(ARRAY[p_type]);
            RETURN id;
        END IF;
    END LOOP;
    RAISE EXCEPTION 'corotask: send_to_key: the task of type "%" with key "%" kept changing; try again', p_type, p_key
        USING ERRCODE = '40001';
END
$$;

REVOKE EXECUTE ON FUNCTION
    corotask.create_tasks(uuid[], text[], uuid[], jsonb[], jsonb[], timestamptz[]),
    corotask.create_tasks(uuid[], text[], uuid[], jsonb[], jsonb[], timestamptz[], jsonb[]),
    corotask.create_tasks(uuid[], text[], uuid[], jsonb[], jsonb[], timestamptz[], jsonb[], text[]),
    corotask.create_tasks(uuid[], text[], uuid[], jsonb[], jsonb[], timestamptz[], jsonb[], text[], smallint[], text[]),
    corotask.create_task(uuid, text, uuid, jsonb, jsonb, timestamptz),
    corotask.send_to_task(uuid, uuid, jsonb),
    corotask.send_to_task(uuid, uuid, jsonb, jsonb),
    corotask.send_to_key(text, text, jsonb, jsonb, jsonb)
FROM PUBLIC;
