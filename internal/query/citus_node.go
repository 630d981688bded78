package query

// A claim per worker. Claiming shard by shard (as the claims of types with
// flow controls still do) makes one call per shard with work, up to the
// table's shard count (32 by default), after a read over every shard to
// find them; each call crosses from the coordinator to a worker. claim_node
// makes one call per worker instead: Citus delegates it, by its key, to the
// worker that holds the key's shard, and there it looks at each shard of
// the tasks that the worker holds (an index probe or two per type), then
// runs Claim on those with work, in the order of their work (expired claims
// first, then the highest priority, then the oldest), until the claim is
// filled. The executor keeps a key of each worker (CitusNodeKeys), checked
// at every search of expired claims, and calls them in turn. The claims of
// types with flow controls go shard by shard (ClaimShardCounted): they
// count the keys each shard's claim took before the next.

// CitusNodeKeys returns a key of each node that holds shards of the tasks:
// of the keys $1 (those the executor knows), one whose shard is on it;
// for a node none of them is on (a node added, a shard moved), one of $2
// random UUIDs whose shard is on it, or NULL if none of them is (a node
// with few shards: the next read samples again). Sampling costs about
// 0.1 ms a UUID; checking the known keys, about a millisecond.
const CitusNodeKeys = `WITH nodes AS (
    SELECT DISTINCT p.groupid FROM pg_catalog.pg_dist_shard s
    JOIN pg_catalog.pg_dist_placement p ON p.shardid = s.shardid
    WHERE s.logicalrelid = 'corotask.tasks'::regclass
), known AS (
    SELECT DISTINCT ON (p.groupid) p.groupid, k.k FROM unnest($1::uuid[]) AS k(k)
    JOIN pg_catalog.pg_dist_placement p ON p.shardid = pg_catalog.get_shard_id_for_distribution_column('corotask.tasks', k.k)
    ORDER BY p.groupid, k.k
), sampled AS (
    SELECT DISTINCT ON (p.groupid) p.groupid, k.k FROM (
        SELECT gen_random_uuid() AS k FROM generate_series(1, $2::int)
        WHERE EXISTS (SELECT 1 FROM nodes n WHERE n.groupid NOT IN (SELECT groupid FROM known))
    ) k
    JOIN pg_catalog.pg_dist_placement p ON p.shardid = pg_catalog.get_shard_id_for_distribution_column('corotask.tasks', k.k)
    ORDER BY p.groupid, k.k
)
SELECT coalesce(k.k, s.k) FROM nodes n
LEFT JOIN known k ON k.groupid = n.groupid
LEFT JOIN sampled s ON s.groupid = n.groupid
WHERE coalesce(k.k, s.k) IS NOT NULL
ORDER BY n.groupid`

// CitusNodeSamples is how many random UUIDs CitusNodeKeys tries when a
// node has no known key: a node with 1 of 32 shards is missed with a
// probability of (31/32)^256, about 3e-4, and found at a later read.
const CitusNodeSamples = 256

// ClaimNode is Claim on every shard of the worker that holds key $1's
// shard, with Claim's parameters after it ($2 to $13 are Claim's $1 to $12)
// and, $14, the lowest priority it claims (1 for the priority lane). Its
// rows are Claim's, but its last row carries only the next wake_at (of the
// worker's shards), whether a type polled has flow controls, and in the
// column failures the highest priority of the ready tasks it left on its
// shards (as far as it looked; NULL: none), by which the executor orders
// the workers at its next claim.
var ClaimNode = `SELECT * FROM ` + claimNodeName + `($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`

// claimNodeDigest is the digest of claimNodeFunction's text, which holds
// Claim. claimNodeName, this build's claim_node, carries it, as do the
// names of the statements it prepares in its worker's sessions, one per
// shard (claimNodePrefix), so that the functions of two builds never call,
// nor run, each other's.
var (
	claimNodeDigest = digest(claimNodeFunction("NAME", "STMT"))
	claimNodeName   = "corotask.claim_node_" + claimNodeDigest
	claimNodePrefix = "corotask_" + claimNodeDigest + "_"
)

// claimNodePeek is what claim_node reads of a shard (%1$s) before it
// claims: what comes first there ($1 the types, $2 the lowest priority,
// $3 whether expired claims count): k 0 for an expired claim, 1 for a
// ready task, its priority, its time; and the next wake_at of the types.
// Each search is one index probe per type.
const claimNodePeek = `SELECT w.k, w.priority, w.at, (
    SELECT min(n.wake_at) FROM unnest($1) AS q(typ)
    CROSS JOIN LATERAL (
        SELECT t.wake_at FROM %1$s t
        WHERE t.claim IS NULL AND t.done_at IS NULL AND t.wake_at IS NOT NULL
          AND t.wake_at > corotask.now() AND t.task_type = q.typ
        ORDER BY t.wake_at LIMIT 1) n)
FROM (SELECT 1) z
LEFT JOIN LATERAL (
    (SELECT 0 AS k, 0::smallint AS priority, t.claim_expires_at AS at FROM %1$s t
     WHERE $3 AND t.claim IS NOT NULL AND t.claim_expires_at < corotask.now() AND t.done_at IS NULL
       AND t.task_type = ANY ($1)
     ORDER BY t.claim_expires_at LIMIT 1)
    UNION ALL
    (SELECT 1, r.priority, r.wake_at FROM unnest($1) AS q(typ)
     CROSS JOIN LATERAL (
         SELECT t.priority, t.wake_at FROM %1$s t
         WHERE t.claim IS NULL AND t.done_at IS NULL AND t.wake_at IS NOT NULL AND t.priority > 0
           AND t.priority >= $2 AND t.wake_at <= corotask.now() AND t.task_type = q.typ
         ORDER BY t.priority DESC, t.wake_at LIMIT 1) r)
    UNION ALL
    (SELECT 1, 0::smallint, r.wake_at FROM unnest($1) AS q(typ)
     CROSS JOIN LATERAL (
         SELECT t.wake_at FROM %1$s t
         WHERE $2 <= 0 AND t.claim IS NULL AND t.done_at IS NULL AND t.wake_at IS NOT NULL
           AND t.priority = 0 AND t.wake_at <= corotask.now() AND t.task_type = q.typ
         ORDER BY t.wake_at LIMIT 1) r)
    ORDER BY 1, 2 DESC, 3
    LIMIT 1
) w ON true`

// claimNodeFunction makes the function name (see above). The statements it
// runs on a shard are format strings over the shard's tables, as
// claimShardFunction's: %1$s the tasks, %2$s the messages, %3$s the history
// (the shards of the same hash range: colocated, on the same worker), %4$s
// the worker's copy of type_controls. It prepares them once per shard in
// each of the worker's sessions (Citus keeps its connections to the
// workers), named from prefix: planned afresh at every call, the claim and
// the reads of sixteen shards took 15 - 20 ms, most of it planning.
func claimNodeFunction(name, prefix string) string {
	claim := onShardClaim(Claim)
	return `
CREATE OR REPLACE FUNCTION ` + name + `(p_key uuid,
    ` + claimFunctionParams + `, p13 smallint)
` + claimFunctionReturns + `
LANGUAGE plpgsql SET search_path = '' SET enable_seqscan = off SET jit = off SET plan_cache_mode = force_generic_plan AS $f$
DECLARE
    ctl text := ` + typeControlsShard + `;
    prepared text[] := ARRAY(SELECT ps.name FROM pg_catalog.pg_prepared_statements ps WHERE ps.name LIKE '` + prefix + `%');
    sh record;
    -- The worker's shards with work, and what comes first on each.
    shards bigint[] := '{}';
    ks integer[] := '{}';
    prios smallint[] := '{}';
    ats timestamptz[] := '{}';
    w_k integer;
    w_prio smallint;
    w_at timestamptz;
    w_next timestamptz;
    next_wake timestamptz;
    left_n integer := p2;
    caps integer[] := p4;
    gained boolean := false;
    top smallint;
    i integer;
BEGIN
    -- Called on a node that does not hold the key's shard, Citus did not
    -- delegate the call: it would claim nothing there.
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_placement p
                   WHERE p.shardid = pg_catalog.get_shard_id_for_distribution_column('corotask.tasks', p_key)
                     AND p.groupid = (SELECT g.groupid FROM pg_catalog.pg_dist_local_group g)) THEN
        RAISE EXCEPTION 'corotask: claim_node ran on a node without the shard of its key %: Citus did not delegate it', p_key
            USING ERRCODE = '55000';
    END IF;
    FOR sh IN
        SELECT s.shardid, pg_catalog.shard_name('corotask.tasks', s.shardid) AS tasks,
               (SELECT pg_catalog.shard_name('corotask.messages', m.shardid) FROM pg_catalog.pg_dist_shard m
                WHERE m.logicalrelid = 'corotask.messages'::regclass AND m.shardminvalue = s.shardminvalue) AS messages,
               (SELECT pg_catalog.shard_name('corotask.history', h.shardid) FROM pg_catalog.pg_dist_shard h
                WHERE h.logicalrelid = 'corotask.history'::regclass AND h.shardminvalue = s.shardminvalue) AS history
        FROM pg_catalog.pg_dist_shard s
        JOIN pg_catalog.pg_dist_placement p ON p.shardid = s.shardid
        WHERE s.logicalrelid = 'corotask.tasks'::regclass
          AND p.groupid = (SELECT g.groupid FROM pg_catalog.pg_dist_local_group g)
    LOOP
        -- A shard moving away may be listed here and gone: passed over.
        CONTINUE WHEN pg_catalog.to_regclass(sh.tasks) IS NULL OR pg_catalog.to_regclass(sh.messages) IS NULL
            OR pg_catalog.to_regclass(sh.history) IS NULL;
        -- Each is looked for apart: a PREPARE outlives the transaction of a
        -- call that failed after it.
        IF NOT ('` + prefix + `peek_' || sh.shardid) = ANY (prepared) THEN
            EXECUTE format('PREPARE %I (text[], smallint, boolean) AS ', '` + prefix + `peek_' || sh.shardid)
                || format($peek$` + claimNodePeek + `$peek$, sh.tasks);
        END IF;
        IF NOT ('` + prefix + `claim_' || sh.shardid) = ANY (prepared) THEN
            EXECUTE format('PREPARE %I (` + ClaimParams + `) AS ', '` + prefix + `claim_' || sh.shardid)
                || format($claim$` + claim + `$claim$, sh.tasks, sh.messages, sh.history, ctl);
        END IF;
        EXECUTE format('EXECUTE %I (%L, %L, %L)', '` + prefix + `peek_' || sh.shardid, p6, p13, p12)
        INTO w_k, w_prio, w_at, w_next;
        next_wake := least(next_wake, w_next);
        CONTINUE WHEN w_k IS NULL;
        shards := shards || sh.shardid;
        ks := ks || w_k;
        prios := prios || w_prio;
        ats := ats || w_at;
    END LOOP;
    -- Claim on the shards with work, the first work first, until filled;
    -- top is then the highest priority of the ready work left: on the
    -- shards not reached, and on the one the claim filled on.
    FOR i IN SELECT u.i FROM unnest(ks, prios, ats) WITH ORDINALITY AS u(k, prio, at, i) ORDER BY u.k, u.prio DESC, u.at
    LOOP
        IF left_n <= 0 OR gained THEN
            IF ks[i] = 1 THEN
                top := greatest(top, prios[i]);
            END IF;
            CONTINUE;
        END IF;
        FOR task_id, task_type, parent_id, root_id, inner_state, envelopes, seqs, more, claim, failures, attempts,
            taken_over, at, trace, floors, stale_floor, task_key, woke IN
            EXECUTE format('EXECUTE %I (%L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L)', '` + prefix + `claim_' || shards[i],
                p1, left_n, p3, caps, p5, p6, p7, p8, p9, p10, p11, p12)
        LOOP
            IF task_id IS NULL THEN
                -- Claim's last row: a type polled has gained flow controls.
                gained := gained OR woke IS NOT NULL;
                CONTINUE;
            END IF;
            left_n := left_n - 1;
            IF array_position(p3, task_type) IS NOT NULL THEN
                caps[array_position(p3, task_type)] := caps[array_position(p3, task_type)] - 1;
            END IF;
            floors := NULL;
            stale_floor := NULL;
            RETURN NEXT;
        END LOOP;
        IF left_n <= 0 AND ks[i] = 1 THEN
            top := greatest(top, prios[i]);
        END IF;
    END LOOP;
    task_id := NULL; task_type := NULL; parent_id := NULL; root_id := NULL; inner_state := NULL; envelopes := NULL;
    seqs := NULL; more := NULL; claim := NULL; failures := top; attempts := NULL; taken_over := NULL;
    at := next_wake; trace := NULL; floors := NULL; stale_floor := NULL; task_key := NULL;
    woke := CASE WHEN gained THEN 1 END;
    RETURN NEXT;
END
$f$;

SELECT create_distributed_function(
    '` + name + `(uuid, ` + claimFunctionTypes + `, smallint)',
    'p_key', colocate_with => 'corotask.tasks', force_delegation => true);
`
}
