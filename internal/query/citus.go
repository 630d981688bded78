package query

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// Citus: the statements an executor sends when the tasks table is
// distributed (see docs/scaling.md, "Citus"), and the functions that
// sql.Distribute creates for them. A claim cannot be one statement on the
// coordinator (Citus runs FOR UPDATE SKIP LOCKED only on one shard, chosen
// by an equality on the distribution column, and a claim does not know the
// roots it will take), so the executor claims worker by worker: it calls
// corotask.claim_node with a key of each worker (ClaimNode, in
// citus_node.go), which Citus runs whole on that worker, where it runs
// Claim on each of the worker's shards with work, with the shard's own
// tables in place of the distributed ones: plain PostgreSQL, locks and
// all. The types with flow controls are claimed shard by shard: the
// executor reads which shards hold their work (CitusShardsWithWork), then
// calls corotask.claim_shard_counted with a root of each.

// CitusInstalled reports whether the database has the citus extension;
// CitusDistributed, to be asked only then, whether corotask.tasks is
// distributed.
const (
	CitusInstalled   = `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus')`
	CitusDistributed = `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = 'corotask.tasks'::regclass)`
)

// ClaimShardExists reports whether this build's claim functions exist
// (sql.Distribute makes them): an executor claims through them when
// corotask.tasks is distributed, and refuses to start when it is but one
// is missing.
func ClaimShardExists() string {
	return `SELECT to_regproc('` + claimNodeName + `') IS NOT NULL AND to_regproc('` + claimShardCountedName + `') IS NOT NULL`
}

// CitusShardsWithWork reads, over every shard, the roots of the first $2
// ready tasks of the types $1 of priority $4 or more (by priority, then
// age), but those whose type and limit key $5 names (each as
// CitusKeyAtLimit makes it: keys at their space's limit, whose tasks would
// take the places of the others'), and when $3 the roots of up to $2 tasks
// of those types whose claim expired; each with its shard, in that order. The executor claims on the shards they name, one
// root per shard (see claim_shard). The second statement of the read,
// CitusNextWake, says when to look again.
const CitusShardsWithWork = `
SELECT get_shard_id_for_distribution_column('corotask.tasks', w.root_id), w.root_id FROM (
    (SELECT root_id, 0 AS k, priority, wake_at AS at FROM corotask.tasks
     WHERE claim IS NULL AND done_at IS NULL AND wake_at IS NOT NULL AND wake_at <= corotask.now()
       AND task_type = ANY ($1::text[]) AND priority >= $4::smallint
       AND (limit_key IS NULL OR cardinality($5::text[]) = 0
            OR octet_length(task_type) || ':' || task_type || limit_key <> ALL ($5::text[]))
     ORDER BY priority DESC, wake_at
     LIMIT $2)
    UNION ALL
    (SELECT root_id, 1, 0, claim_expires_at FROM corotask.tasks
     WHERE $3::boolean AND claim IS NOT NULL AND claim_expires_at < corotask.now() AND done_at IS NULL
       AND task_type = ANY ($1::text[])
     ORDER BY claim_expires_at
     LIMIT $2)
) w
ORDER BY w.k, w.priority DESC, w.at`

// CitusKeyAtLimit is how CitusShardsWithWork names a task type and a
// limit key: the type's length in bytes, a colon, the type, the key (one
// string, which no other pair makes).
func CitusKeyAtLimit(typ, key string) string {
	return strconv.Itoa(len(typ)) + ":" + typ + key
}

// CitusNextWake is the earliest future wake_at of the ready tasks of the
// types $1, over every shard.
const CitusNextWake = `SELECT min(wake_at) FROM corotask.tasks
WHERE claim IS NULL AND done_at IS NULL AND wake_at IS NOT NULL AND wake_at > corotask.now()
  AND task_type = ANY ($1::text[])`

// claimShardCountedName names the claim function of this build for the
// types with flow controls: claim_shard_counted and a digest of
// ClaimCounted, so that in a rolling deploy each build calls the one made
// from its own claim statement (a migration by an older build makes its
// own, and leaves the newer one). The others are the same for retention's
// and renewal's (claimNodeName for the claim of the other types).
var (
	claimShardCountedName = "corotask.claim_shard_counted_" + digest(ClaimCounted)
	retentionShardName    = "corotask.retention_shard_" + digest(RetentionDelete)
	renewShardName        = "corotask.renew_shard_" + digest(HeartbeatRenew)
)

// CitusShardsOfTasks returns one root of each shard that holds one of the
// tasks $1: a renewal on Citus renews shard by shard (RenewShard).
const CitusShardsOfTasks = `SELECT DISTINCT ON (s.shard) s.root_id FROM (
    SELECT get_shard_id_for_distribution_column('corotask.tasks', t.root_id) AS shard, t.root_id
    FROM corotask.tasks t WHERE t.task_id = ANY ($1::uuid[])
) s`

// RenewShard is HeartbeatRenew on the shard that holds root $1, with
// HeartbeatRenew's parameters after it: it renews the claims of $2 and $3
// that lie on that shard (the others match no row there), passing over the
// rows other transactions hold, as on one server.
var RenewShard = `SELECT * FROM ` + renewShardName + `($1, $2, $3, $4)`

// digest is the first 12 hex digits of the SHA-256 of a statement.
func digest(statement string) string {
	sum := sha256.Sum256([]byte(statement))
	return hex.EncodeToString(sum[:6])
}

// CitusShardsToClean reads, over every shard, the roots of up to $2 tasks
// that ended more than $1 seconds ago and have no children (those
// RetentionDelete deletes), the oldest first, each with its shard:
// retention on Citus deletes shard by shard (RetentionShard), one root per
// shard.
const CitusShardsToClean = `SELECT DISTINCT ON (s.shard) s.shard, s.root_id FROM (
    SELECT get_shard_id_for_distribution_column('corotask.tasks', r.root_id) AS shard, r.root_id FROM (
        SELECT t.root_id FROM corotask.tasks t
        WHERE t.done_at IS NOT NULL AND t.done_at < corotask.now() - make_interval(secs => $1)
          AND NOT EXISTS (SELECT 1 FROM corotask.tasks c WHERE c.root_id = t.root_id AND c.parent_id = t.task_id)
        ORDER BY t.done_at
        LIMIT $2
    ) r
) s`

// RetentionShard is RetentionDelete on the shard that holds root $1, with
// RetentionDelete's parameters after it.
var RetentionShard = `SELECT ` + retentionShardName + `($1, $2, $3)`

// CitusSettings stands, in a claim's pipeline on Citus, where ClaimSettings
// stands on one server: the claim's plan is made on the worker, by
// claim_shard's own settings, and the controls lock is not taken there (the
// types with flow controls are claimed under it, held on the coordinator:
// see CitusClaimBegin).
const CitusSettings = "SELECT set_config('jit', 'off', true)"

// claimShardTables are the tables the statements run on a shard read or
// write, and the name each takes in their format strings: the shard of the
// tasks, messages and history of the root p_key, and the worker's copy of
// the reference table type_controls (shardTables, in that order). Longer
// names first: a name that begins with another is replaced whole.
var claimShardTables = []struct{ table, shard string }{
	{"corotask.type_controls", "%4$s"},
	{"corotask.messages", "%2$s"},
	{"corotask.history", "%3$s"},
	{"corotask.tasks", "%1$s"},
}

// shardTables are the arguments of the format strings of onShard: the
// names of the shards of p_key's root, and of type_controls' copy.
const shardTables = `
        pg_catalog.shard_name('corotask.tasks', pg_catalog.get_shard_id_for_distribution_column('corotask.tasks', p_key)),
        pg_catalog.shard_name('corotask.messages', pg_catalog.get_shard_id_for_distribution_column('corotask.messages', p_key)),
        pg_catalog.shard_name('corotask.history', pg_catalog.get_shard_id_for_distribution_column('corotask.history', p_key)),
        ` + typeControlsShard

// typeControlsShard is the name of the worker's copy of the reference table
// type_controls (its one shard).
const typeControlsShard = `pg_catalog.shard_name('corotask.type_controls',
            (SELECT s.shardid FROM pg_catalog.pg_dist_shard s WHERE s.logicalrelid = 'corotask.type_controls'::regclass))`

// claimFunctionParams, claimFunctionTypes and claimFunctionReturns are the
// parameters after p_key (Claim's $1 to $12), their types for
// create_distributed_function, and the rows (Claim's) of the functions that
// run a claim on a worker: claim_shard_counted and claim_node.
const (
	claimFunctionParams = `p1 text[], p2 integer, p3 text[], p4 integer[], p5 double precision, p6 text[], p7 uuid, p8 uuid[], p9 integer[],
    p10 timestamptz[], p11 timestamptz, p12 boolean`
	claimFunctionTypes   = `text[], integer, text[], integer[], double precision, text[], uuid, uuid[], integer[], timestamptz[], timestamptz, boolean`
	claimFunctionReturns = `RETURNS TABLE (task_id uuid, task_type text, parent_id uuid, root_id uuid, inner_state jsonb, envelopes jsonb[], seqs bigint[],
    more boolean, claim uuid, failures integer, attempts integer, taken_over boolean, at timestamptz, trace jsonb,
    floors timestamptz[], stale_floor timestamptz, task_key text, woke smallint)`
)

// claimShardFunction makes the function name, which runs the claim
// statement (a format string over shardTables, $1 to $12 Claim's
// parameters, and from $13 on one of each type of extra) on the shard that
// holds p_key's root, and has Citus delegate its calls to that shard's
// worker.
func claimShardFunction(name, statement string, extra ...string) string {
	params, types, using := "", "", ""
	for i, typ := range extra {
		p := "p" + strconv.Itoa(13+i)
		params, types, using = params+", "+p+" "+typ, types+", "+typ, using+", "+p
	}
	return `
CREATE OR REPLACE FUNCTION ` + name + `(p_key uuid,
    ` + claimFunctionParams + params + `)
` + claimFunctionReturns + `
LANGUAGE plpgsql SET search_path = '' SET enable_seqscan = off SET jit = off AS $f$
BEGIN
    RETURN QUERY EXECUTE format($claim$` + statement + `$claim$, ` + shardTables + `)
    USING p1, p2, p3, p4, p5, p6, p7, p8, p9, p10, p11, p12` + using + `;
END
$f$;

SELECT create_distributed_function(
    '` + name + `(uuid, ` + claimFunctionTypes + types + `)',
    'p_key', colocate_with => 'corotask.tasks', force_delegation => true);
`
}

// onShardClaim is onShard of a claim statement, whose inbox window reads
// the shard's messages.
func onShardClaim(claim string) string {
	return strings.ReplaceAll(onShard(claim), "corotask.inbox_window(", "corotask.inbox_window_in(%2$L::regclass, ")
}

// onShard is statement as a format string over shardTables: its own %
// doubled, then the tables named by their position.
func onShard(statement string) string {
	q := strings.ReplaceAll(statement, "%", "%%")
	for _, t := range claimShardTables {
		q = strings.ReplaceAll(q, t.table, t.shard)
	}
	return q
}

// ClaimShardFunctions is the SQL that sql.Distribute (and sql.Migrate, on
// a distributed database) runs to make the claim's functions:
// corotask.inbox_window_in (inbox_window, on a table it is given),
// corotask.retention_shard_<digest> (RetentionDelete on the tables of the
// shard that holds p_key's root, run with EXECUTE),
// corotask.renew_shard_<digest> (HeartbeatRenew, likewise),
// corotask.claim_shard_counted_<digest> (ClaimCounted, likewise) and
// corotask.claim_node_<digest> (Claim on every shard of a worker: see
// ClaimNode). It also lets commit_polls and deliver_all be planned for
// their parameters: Citus cannot plan their statements on a generic plan.
//
// Claim claims nothing when a type polled has flow controls, and says so
// in its last row: the executor on Citus claims those types with
// claim_shard_counted, within the caps it counted under the controls lock
// (see CitusClaimBegin).
func ClaimShardFunctions() string {
	counted := onShardClaim(ClaimCounted)
	retention, renew := onShard(RetentionDelete), onShard(HeartbeatRenew)
	return `
CREATE OR REPLACE FUNCTION corotask.inbox_window_in(p_messages regclass, p_task uuid, p_after bigint, p_upto bigint,
    p_limit integer, OUT envelopes jsonb[], OUT seqs bigint[])
LANGUAGE plpgsql VOLATILE SET search_path = '' AS $f$
BEGIN
    EXECUTE format('SELECT array_agg(w.envelope ORDER BY w.seq), array_agg(w.seq ORDER BY w.seq)
        FROM (SELECT m.envelope, m.seq FROM %s m
              WHERE m.task_id = $1 AND m.seq > $2 AND m.seq <= $3
              ORDER BY m.seq LIMIT $4) w', p_messages)
    INTO envelopes, seqs
    USING p_task, p_after, p_upto, p_limit;
END
$f$;

` + claimShardFunction(claimShardCountedName, counted, "text[]", "text[]", "text[]", "integer[]", "text[]", "text[]", "integer[]") +
		claimNodeFunction(claimNodeName, claimNodePrefix) + `
CREATE OR REPLACE FUNCTION ` + retentionShardName + `(p_key uuid, p1 double precision, p2 integer)
RETURNS bigint
LANGUAGE plpgsql SET search_path = '' AS $f$
DECLARE
    n bigint;
BEGIN
    EXECUTE format($retention$` + retention + `$retention$, ` + shardTables + `)
    INTO n
    USING p1, p2;
    RETURN n;
END
$f$;

SELECT create_distributed_function('` + retentionShardName + `(uuid, double precision, integer)',
    'p_key', colocate_with => 'corotask.tasks', force_delegation => true);

CREATE OR REPLACE FUNCTION ` + renewShardName + `(p_key uuid, p1 uuid[], p2 uuid[], p3 double precision)
RETURNS TABLE (task_id uuid)
LANGUAGE plpgsql SET search_path = '' AS $f$
BEGIN
    RETURN QUERY EXECUTE format($renew$` + renew + `$renew$, ` + shardTables + `)
    USING p1, p2, p3;
END
$f$;

SELECT create_distributed_function('` + renewShardName + `(uuid, uuid[], uuid[], double precision)',
    'p_key', colocate_with => 'corotask.tasks', force_delegation => true);

-- The functions of the executor and of the API that write the distributed
-- tables over several shards in one statement (an UPDATE by task ID,
-- without its root) do so with Citus' commutative locks: by default Citus
-- runs two such statements on a table one after the other (each holds
-- locks on the shards it writes until its transaction ends), so that every
-- commit waited for every other, and one that waited for a row a commit
-- held while holding the shards that commit needed made a distributed
-- deadlock. The shards have one placement each: the row locks order the
-- writes, as on one server. None of these functions writes a reference
-- table. Each signature of a name is set (a release that changed one
-- keeps the others' callers working: see sql.Migrate).
DO $d$
DECLARE
    f regprocedure;
    n name;
BEGIN
    FOR f, n IN
        SELECT p.oid::regprocedure, p.proname FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'corotask'::regnamespace
          AND p.proname IN ('commit_polls', 'release_claims', 'fail_poll', 'fail_claimed', 'record_lost',
                            'deliver_all', 'deliver_one', 'send_to_task', 'create_tasks', 'cancel_task', 'operator_send')
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET citus.all_modifications_commutative = on', f);
        IF n IN ('commit_polls', 'deliver_all') THEN
            EXECUTE format('ALTER FUNCTION %s RESET plan_cache_mode', f);
        END IF;
    END LOOP;
END
$d$;

-- What the functions test to take the Citus form of a statement (see
-- commit_polls): set for the sessions that connect from now on.
DO $d$
BEGIN
    EXECUTE format('ALTER DATABASE %I SET corotask.distributed = on', current_database());
END
$d$;
`
}
