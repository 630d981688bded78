-- Flow control (schema 14): the changes of the controls that limit claims,
-- and the taking of tokens from a rate limit. The tables are those of
-- migration 14: corotask.type_controls (per task type: a pause, a fleet-wide
-- maximum of running polls, the key space its tasks count in, the rate limit
-- its poll starts take from), corotask.key_limits, corotask.rate_limits and
-- corotask.control_history.
--
-- Each change validates its input, changes the controls, and records one row
-- of corotask.control_history in the same transaction, with the database
-- role of the session that asked for it (session_user: inside these
-- functions current_user is the schema's owner). A row of type_controls
-- with no control left is deleted: the claims of a type without a row read
-- nothing more.
--
-- They run with the rights of the schema's owner, as the operator actions
-- do; EXECUTE is revoked from PUBLIC, so that an operator's role gets them
-- by grant (see docs/flow-control.md). acquire_tokens, take_tokens and
-- give_back_tokens are the exceptions: the polls and claims of executors
-- call them, with their own rights (UPDATE on corotask.rate_limits, which
-- migration 14 grants to the roles that update tasks), as they call their
-- other functions.
--
-- They lock the rows of type_controls first, in the order of their types,
-- then those of key_limits or rate_limits, as a claim does (it locks the
-- rows of its limited types before it counts and takes tokens), so that a
-- change and a claim never wait for each other in a cycle.
--
-- Errors: 22023 for a bad value (a maximum below 1, an empty name, no
-- types, a priority out of 0..32767), 22004 for a NULL where a value is
-- needed, and corotask's own codes:
--   CT4T4  unknown task type: no executor registered it, no task has it and
--          it has no controls (a typo?), unless p_allow_new
--   CT4P9  the type is paused already (the message says since when, by whom)
--   CT4N9  the type is not paused
--   CT4R4  no rate limit of that name
--   CT4K4  no key limit of that key space
-- set_task_priority raises those of operator_lock: CT404, CT410, CT409.

-- control_begin begins a change of the controls: it takes the controls lock
-- (see corotask.controls_lock_key) exclusive, which every claim holds shared while it
-- runs, so that the change waits for the claims in flight and every later
-- claim sees it (once pause_type returns, no claim of the type starts). It
-- is taken before any row, as claims take it before theirs.
CREATE OR REPLACE FUNCTION corotask.control_begin()
RETURNS void
LANGUAGE sql SET search_path = '' AS $$
    SELECT pg_catalog.pg_advisory_xact_lock(corotask.controls_lock_key())
$$;

-- control_record records a change of the controls.
CREATE OR REPLACE FUNCTION corotask.control_record(p_action text, p_subject text, p_detail text)
RETURNS void
LANGUAGE sql SET search_path = '' AS $$
    INSERT INTO corotask.control_history (action, subject, detail, by_role)
    VALUES (p_action, p_subject, p_detail, session_user)
$$;

-- control_tidy deletes the rows of type_controls that control nothing any
-- more.
CREATE OR REPLACE FUNCTION corotask.control_tidy()
RETURNS void
LANGUAGE sql SET search_path = '' AS $$
    DELETE FROM corotask.type_controls
    WHERE max_running IS NULL AND key_space IS NULL AND rate_limit IS NULL AND paused_at IS NULL
$$;

-- control_name refuses a NULL or empty name of a task type, key space or
-- rate limit (p_what names which), or one with leading or trailing space.
CREATE OR REPLACE FUNCTION corotask.control_name(p_name text, p_what text)
RETURNS void
LANGUAGE plpgsql SET search_path = '' AS $$
BEGIN
    IF p_name IS NULL THEN
        RAISE EXCEPTION 'corotask: no %', p_what USING ERRCODE = '22004';
    END IF;
    IF p_name = '' THEN
        RAISE EXCEPTION 'corotask: empty %', p_what USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.btrim(p_name) <> p_name THEN
        RAISE EXCEPTION 'corotask: % "%" has leading or trailing space', p_what, p_name USING ERRCODE = '22023';
    END IF;
END
$$;

-- control_type refuses a type that no executor registered, no task has and
-- that has no controls (CT4T4), unless p_allow_new: a control set on a
-- misspelt type would hold back nothing. When the type is unknown, looking
-- for a task of it reads the whole table.
CREATE OR REPLACE FUNCTION corotask.control_type(p_type text, p_allow_new boolean)
RETURNS void
LANGUAGE plpgsql SET search_path = '' AS $$
BEGIN
    PERFORM corotask.control_name(p_type, 'task type');
    IF p_allow_new
       OR EXISTS (SELECT 1 FROM corotask.type_controls c WHERE c.task_type = p_type)
       OR EXISTS (SELECT 1 FROM corotask.executors e WHERE p_type = ANY (e.task_types))
       OR EXISTS (SELECT 1 FROM corotask.tasks t WHERE t.task_type = p_type) THEN
        RETURN;
    END IF;
    RAISE EXCEPTION 'corotask: unknown task type "%"', p_type
        USING ERRCODE = 'CT4T4',
              HINT = 'no executor registered it and no task has it: check its spelling';
END
$$;

-- control_types checks a list of types as control_type does, and returns
-- them without duplicates, in order. p_none_ok allows an empty list (or
-- NULL).
CREATE OR REPLACE FUNCTION corotask.control_types(p_types text[], p_allow_new boolean, p_none_ok boolean)
RETURNS text[]
LANGUAGE plpgsql SET search_path = '' AS $$
DECLARE
    typ text;
BEGIN
    IF coalesce(pg_catalog.cardinality(p_types), 0) = 0 THEN
        IF NOT p_none_ok THEN
            RAISE EXCEPTION 'corotask: no task types' USING ERRCODE = '22023';
        END IF;
        RETURN '{}';
    END IF;
    FOREACH typ IN ARRAY p_types LOOP
        PERFORM corotask.control_type(typ, p_allow_new);
    END LOOP;
    RETURN ARRAY(SELECT DISTINCT u FROM unnest(p_types) AS u ORDER BY 1);
END
$$;

-- control_lock locks the rows of type_controls of p_types, creating those
-- missing (with no control, so that control_tidy deletes those left so),
-- and those whose column p_column (key_space or rate_limit) is p_name, in
-- the order of their types.
CREATE OR REPLACE FUNCTION corotask.control_lock(p_types text[], p_column text, p_name text)
RETURNS void
LANGUAGE plpgsql SET search_path = '' AS $$
BEGIN
    INSERT INTO corotask.type_controls (task_type)
    SELECT u FROM unnest(p_types) AS u ORDER BY 1
    ON CONFLICT (task_type) DO NOTHING;
    PERFORM 1 FROM corotask.type_controls c
    WHERE c.task_type = ANY (p_types)
       OR (p_column = 'key_space' AND c.key_space = p_name)
       OR (p_column = 'rate_limit' AND c.rate_limit = p_name)
    ORDER BY c.task_type
    FOR UPDATE;
END
$$;

-- pause_type pauses the claims of a type: no executor claims its tasks
-- until resume_type (the polls running go on to their end). It raises
-- CT4P9 when the type is paused already.
CREATE OR REPLACE FUNCTION corotask.pause_type(p_type text, p_allow_new boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = '' AS $$
DECLARE
    c corotask.type_controls;
BEGIN
    PERFORM corotask.control_begin();
    PERFORM corotask.control_type(p_type, p_allow_new);
    INSERT INTO corotask.type_controls AS x (task_type, paused_at, paused_by)
    VALUES (p_type, now(), session_user)
    ON CONFLICT (task_type) DO UPDATE SET paused_at = excluded.paused_at, paused_by = excluded.paused_by
    WHERE x.paused_at IS NULL;
    IF NOT FOUND THEN
        SELECT * INTO c FROM corotask.type_controls WHERE task_type = p_type;
        RAISE EXCEPTION 'corotask: type "%" is paused already, since % by %', p_type, c.paused_at, c.paused_by
            USING ERRCODE = 'CT4P9';
    END IF;
    PERFORM corotask.control_record('pause', p_type, NULL);
END
$$;

-- resume_type lets executors claim the tasks of a paused type again. It
-- raises CT4N9 when the type is not paused.
CREATE OR REPLACE FUNCTION corotask.resume_type(p_type text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = '' AS $$
DECLARE
    c corotask.type_controls;
BEGIN
    PERFORM corotask.control_begin();
    PERFORM corotask.control_name(p_type, 'task type');
    SELECT * INTO c FROM corotask.type_controls WHERE task_type = p_type FOR UPDATE;
    IF NOT FOUND OR c.paused_at IS NULL THEN
        RAISE EXCEPTION 'corotask: type "%" is not paused', p_type USING ERRCODE = 'CT4N9';
    END IF;
    UPDATE corotask.type_controls SET paused_at = NULL, paused_by = NULL WHERE task_type = p_type;
    PERFORM corotask.control_tidy();
    -- Executors waiting for the type's tasks claim at once, not at their
    -- next PollInterval.
    PERFORM corotask.announce(ARRAY[p_type]);
    PERFORM corotask.control_record('resume', p_type,
        'paused since ' || c.paused_at || ' by ' || coalesce(c.paused_by, 'unknown'));
END
$$;

-- set_max_running sets the fleet-wide maximum of running polls of a type
-- (at least 1). A lower maximum than the polls running now stops nothing:
-- claims wait until they have ended below it.
CREATE OR REPLACE FUNCTION corotask.set_max_running(p_type text, p_max integer, p_allow_new boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = '' AS $$
BEGIN
    PERFORM corotask.control_begin();
    IF p_max IS NULL OR p_max < 1 THEN
        RAISE EXCEPTION 'corotask: maximum of running polls of type "%" must be at least 1, not %',
            p_type, coalesce(p_max::text, 'NULL')
            USING ERRCODE = '22023', HINT = 'pause the type to run none, or clear its maximum';
    END IF;
    PERFORM corotask.control_type(p_type, p_allow_new);
    INSERT INTO corotask.type_controls AS x (task_type, max_running) VALUES (p_type, p_max)
    ON CONFLICT (task_type) DO UPDATE SET max_running = excluded.max_running;
    -- The polls running already count from now on (they were claimed
    -- without counting, if the type had no maximum).
    UPDATE corotask.tasks SET counted = true
    WHERE task_type = p_type AND claim IS NOT NULL AND counted IS NOT TRUE;
    PERFORM corotask.announce(ARRAY[p_type]);
    PERFORM corotask.control_record('max_running', p_type, p_max::text);
END
$$;

-- clear_max_running removes the maximum of running polls of a type. A type
-- without one is left as it is, and nothing is recorded.
CREATE OR REPLACE FUNCTION corotask.clear_max_running(p_type text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = '' AS $$
BEGIN
    PERFORM corotask.control_begin();
    PERFORM corotask.control_name(p_type, 'task type');
    UPDATE corotask.type_controls SET max_running = NULL WHERE task_type = p_type AND max_running IS NOT NULL;
    IF FOUND THEN
        PERFORM corotask.control_tidy();
        PERFORM corotask.control_record('max_running', p_type, 'cleared');
    END IF;
END
$$;

-- set_key_limit sets the maximum of running tasks per key (tasks.limit_key)
-- of the key space p_space, counted over the types p_types, which then are
-- exactly the types of the space: a type that was in it and is not in
-- p_types leaves it, and one that was in another space moves to this one.
CREATE OR REPLACE FUNCTION corotask.set_key_limit(p_space text, p_max integer, p_types text[],
    p_allow_new boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = '' AS $$
DECLARE
    types text[];
BEGIN
    PERFORM corotask.control_begin();
    PERFORM corotask.control_name(p_space, 'key space');
    IF p_max IS NULL OR p_max < 1 THEN
        RAISE EXCEPTION 'corotask: maximum of running tasks per key of key space "%" must be at least 1, not %',
            p_space, coalesce(p_max::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    types := corotask.control_types(p_types, p_allow_new, false);
    PERFORM corotask.control_lock(types, 'key_space', p_space);
    UPDATE corotask.type_controls SET key_space = NULL WHERE key_space = p_space AND NOT task_type = ANY (types);
    UPDATE corotask.type_controls SET key_space = p_space WHERE task_type = ANY (types);
    INSERT INTO corotask.key_limits AS k (key_space, max_running) VALUES (p_space, p_max)
    ON CONFLICT (key_space) DO UPDATE SET max_running = excluded.max_running;
    PERFORM corotask.control_tidy();
    PERFORM corotask.control_record('key_limit', p_space,
        p_max || ' per key, types ' || pg_catalog.array_to_string(types, ', '));
END
$$;

-- clear_key_limit removes the key space p_space and takes its types out of
-- it. It raises CT4K4 when there is no such space.
CREATE OR REPLACE FUNCTION corotask.clear_key_limit(p_space text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = '' AS $$
BEGIN
    PERFORM corotask.control_begin();
    PERFORM corotask.control_name(p_space, 'key space');
    IF NOT EXISTS (SELECT 1 FROM corotask.key_limits WHERE key_space = p_space) THEN
        RAISE EXCEPTION 'corotask: no key limit of key space "%"', p_space USING ERRCODE = 'CT4K4';
    END IF;
    PERFORM corotask.control_lock('{}', 'key_space', p_space);
    UPDATE corotask.type_controls SET key_space = NULL WHERE key_space = p_space;
    DELETE FROM corotask.key_limits WHERE key_space = p_space;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'corotask: no key limit of key space "%"', p_space USING ERRCODE = 'CT4K4';
    END IF;
    PERFORM corotask.control_tidy();
    PERFORM corotask.control_record('key_limit', p_space, 'cleared');
END
$$;

-- set_rate_limit sets the rate limit p_name: at most p_rate takes per p_per
-- (a token bucket of p_rate tokens that refills continuously), and the
-- types whose poll starts take from it, which then are exactly p_types (none:
-- a limit that only acquire_tokens takes from). A new limit starts full;
-- a changed one keeps the tokens it holds, up to its new rate.
CREATE OR REPLACE FUNCTION corotask.set_rate_limit(p_name text, p_rate integer, p_per interval,
    p_types text[] DEFAULT NULL, p_allow_new boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = '' AS $$
DECLARE
    types text[];
    r corotask.rate_limits;
    have float8;
    now_at timestamptz := corotask.now();
BEGIN
    PERFORM corotask.control_begin();
    PERFORM corotask.control_name(p_name, 'rate limit');
    IF p_rate IS NULL OR p_rate < 1 THEN
        RAISE EXCEPTION 'corotask: rate of rate limit "%" must be at least 1, not %', p_name, coalesce(p_rate::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF p_per IS NULL OR p_per < interval '1 millisecond' THEN
        RAISE EXCEPTION 'corotask: period of rate limit "%" must be at least 1 millisecond, not %',
            p_name, coalesce(p_per::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF p_types IS NULL THEN
        -- No list: the limit keeps the types it has (changing a rate does
        -- not detach them); '{}' detaches them all.
        types := ARRAY(SELECT c.task_type FROM corotask.type_controls c WHERE c.rate_limit = p_name ORDER BY 1);
    ELSE
        types := corotask.control_types(p_types, p_allow_new, true);
    END IF;
    PERFORM corotask.control_lock(types, 'rate_limit', p_name);
    UPDATE corotask.type_controls SET rate_limit = NULL WHERE rate_limit = p_name AND NOT task_type = ANY (types);
    UPDATE corotask.type_controls SET rate_limit = p_name WHERE task_type = ANY (types);
    INSERT INTO corotask.rate_limits (name, rate, per, tokens, refilled_at) VALUES (p_name, p_rate, p_per, p_rate, now_at)
    ON CONFLICT (name) DO NOTHING;
    IF NOT FOUND THEN
        SELECT * INTO r FROM corotask.rate_limits WHERE name = p_name FOR UPDATE;
        -- The tokens are a variable: on Citus the UPDATE of a reference
        -- table runs on every node, where no function takes its row type.
        have := corotask.rate_limit_tokens(r, now_at);
        UPDATE corotask.rate_limits
        SET rate = p_rate, per = p_per, tokens = LEAST(p_rate::float8, have),
            refilled_at = GREATEST(r.refilled_at, now_at)
        WHERE name = p_name;
    END IF;
    PERFORM corotask.control_tidy();
    PERFORM corotask.control_record('rate_limit', p_name,
        p_rate || ' per ' || p_per
        || CASE WHEN pg_catalog.cardinality(types) = 0 THEN ', no types'
                ELSE ', types ' || pg_catalog.array_to_string(types, ', ') END);
END
$$;

-- clear_rate_limit removes the rate limit p_name; its types take from none.
-- It raises CT4R4 when there is no such limit.
CREATE OR REPLACE FUNCTION corotask.clear_rate_limit(p_name text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = '' AS $$
BEGIN
    PERFORM corotask.control_begin();
    PERFORM corotask.control_name(p_name, 'rate limit');
    IF NOT EXISTS (SELECT 1 FROM corotask.rate_limits WHERE name = p_name) THEN
        RAISE EXCEPTION 'corotask: no rate limit "%"', p_name USING ERRCODE = 'CT4R4';
    END IF;
    PERFORM corotask.control_lock('{}', 'rate_limit', p_name);
    UPDATE corotask.type_controls SET rate_limit = NULL WHERE rate_limit = p_name;
    DELETE FROM corotask.rate_limits WHERE name = p_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'corotask: no rate limit "%"', p_name USING ERRCODE = 'CT4R4';
    END IF;
    PERFORM corotask.control_tidy();
    PERFORM corotask.control_record('rate_limit', p_name, 'cleared');
END
$$;

-- acquire_tokens takes p_n tokens from the rate limit p_name, after
-- refilling its bucket to corotask.now(): it returns 0 when it took them,
-- else it takes none, writes nothing, and returns how long until p_n tokens
-- would be there (rounded up to the microsecond) if nobody took any
-- meanwhile. It reads the bucket first, and locks the row only when the
-- tokens are there (then reads it again under the lock, which waits for a
-- concurrent take): a refusal locks nothing. The tokens are computed into
-- variables, not in the UPDATE: on Citus the UPDATE of a reference table
-- runs on every node, where no function takes its row type. It raises
-- CT4R4 for an unknown limit, 22023 for p_n below 1 or above the limit's
-- rate (the bucket never holds more). Takes are not recorded in
-- control_history: they change no control.
CREATE OR REPLACE FUNCTION corotask.acquire_tokens(p_name text, p_n integer)
RETURNS interval
LANGUAGE plpgsql SET search_path = '' AS $$
DECLARE
    r corotask.rate_limits;
    have float8;
    now_at timestamptz := corotask.now();
BEGIN
    PERFORM corotask.control_name(p_name, 'rate limit');
    IF p_n IS NULL OR p_n < 1 THEN
        RAISE EXCEPTION 'corotask: take % tokens of rate limit "%": at least 1', coalesce(p_n::text, 'NULL'), p_name
            USING ERRCODE = '22023';
    END IF;
    SELECT * INTO r FROM corotask.rate_limits WHERE name = p_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'corotask: no rate limit "%"', p_name USING ERRCODE = 'CT4R4';
    END IF;
    IF p_n > r.rate THEN
        RAISE EXCEPTION 'corotask: take % tokens of rate limit "%": more than its rate, %', p_n, p_name, r.rate
            USING ERRCODE = '22023', HINT = 'its bucket never holds more than its rate';
    END IF;
    IF corotask.rate_limit_tokens(r, now_at) >= p_n THEN
        SELECT * INTO r FROM corotask.rate_limits WHERE name = p_name FOR NO KEY UPDATE;
        have := corotask.rate_limit_tokens(r, now_at);
        IF have >= p_n THEN
            UPDATE corotask.rate_limits SET tokens = have - p_n, refilled_at = GREATEST(r.refilled_at, now_at)
            WHERE name = p_name;
            RETURN interval '0';
        END IF;
    END IF;
    RETURN pg_catalog.ceil((p_n - corotask.rate_limit_tokens(r, now_at)) * extract(epoch FROM r.per)::float8 * 1e6 / r.rate)
           * interval '1 microsecond';
END
$$;

-- take_tokens takes up to p_n whole tokens (fewer when the bucket holds
-- fewer) from the rate limit p_name, after refilling its bucket to p_at,
-- under the lock of its row, and returns how many it took (0 for an
-- unknown limit). give_back_tokens returns p_n tokens to it, its bucket
-- never above its rate. An executor on Citus reserves with the one the
-- tokens its claims may take, and gives back those they did not (see
-- internal/query's CitusReserveTokens); p_at is the time it read with the
-- controls.
CREATE OR REPLACE FUNCTION corotask.take_tokens(p_name text, p_n integer, p_at timestamptz)
RETURNS integer
LANGUAGE plpgsql SET search_path = '' AS $$
DECLARE
    r corotask.rate_limits;
    have float8;
    took integer;
BEGIN
    SELECT * INTO r FROM corotask.rate_limits WHERE name = p_name FOR NO KEY UPDATE;
    IF NOT FOUND OR p_n < 1 THEN
        RETURN 0;
    END IF;
    have := corotask.rate_limit_tokens(r, p_at);
    took := least(p_n, floor(have))::integer;
    UPDATE corotask.rate_limits SET tokens = have - took, refilled_at = GREATEST(r.refilled_at, p_at)
    WHERE name = p_name;
    RETURN took;
END
$$;

CREATE OR REPLACE FUNCTION corotask.give_back_tokens(p_name text, p_n integer, p_at timestamptz)
RETURNS void
LANGUAGE plpgsql SET search_path = '' AS $$
DECLARE
    r corotask.rate_limits;
    have float8;
BEGIN
    SELECT * INTO r FROM corotask.rate_limits WHERE name = p_name FOR NO KEY UPDATE;
    IF NOT FOUND OR p_n < 1 THEN
        RETURN;
    END IF;
    have := least(r.rate::float8, corotask.rate_limit_tokens(r, p_at) + p_n);
    UPDATE corotask.rate_limits SET tokens = have, refilled_at = GREATEST(r.refilled_at, p_at)
    WHERE name = p_name;
END
$$;

-- set_task_priority sets the priority of a live task no executor holds
-- (0..32767: claims take the higher first, then the oldest wake_at). It is
-- an operator action: it raises the task's attempt number and is recorded
-- in the task's history (action 'priority') and in control_history, which
-- keeps the priority it replaced. It returns that priority.
CREATE OR REPLACE FUNCTION corotask.set_task_priority(p_task uuid, p_priority integer)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = '' AS $$
DECLARE
    t corotask.tasks;
    was integer;
BEGIN
    IF p_priority IS NULL OR p_priority < 0 OR p_priority > 32767 THEN
        RAISE EXCEPTION 'corotask: priority % out of range: from 0 (the lowest) to 32767',
            coalesce(p_priority::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    t := corotask.operator_lock(p_task, 'set_task_priority');
    was := t.priority;
    UPDATE corotask.tasks SET priority = p_priority, attempts = attempts + 1
    WHERE task_id = p_task RETURNING * INTO t;
    PERFORM corotask.operator_record(t, 'priority');
    PERFORM corotask.control_record('priority', p_task::text, p_priority || ' (was ' || was || ')');
    RETURN was;
END
$$;

REVOKE EXECUTE ON FUNCTION
    corotask.pause_type(text, boolean),
    corotask.resume_type(text),
    corotask.set_max_running(text, integer, boolean),
    corotask.clear_max_running(text),
    corotask.set_key_limit(text, integer, text[], boolean),
    corotask.clear_key_limit(text),
    corotask.set_rate_limit(text, integer, interval, text[], boolean),
    corotask.clear_rate_limit(text),
    corotask.set_task_priority(uuid, integer)
FROM PUBLIC;
