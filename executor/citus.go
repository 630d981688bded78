package executor

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/internal/dberr"
	"github.com/corotask/corotask/internal/query"
	corosql "github.com/corotask/corotask/sql"
	"github.com/corotask/corotask/tasks"
)

// distribution is whether the database's tasks are distributed by Citus
// (sql.Distribute), as Run or PollOnce found it when it started: the claim
// is then made shard by shard (claimShards), on connections of its own.
// Everything else an executor sends runs there as it is, planned by the
// coordinator.
//
// Why connections of their own: Citus 13.2 runs a call of claim_shard on
// the worker that holds the shard only in a session that has not yet run a
// statement such as commit_polls' (a function whose modifying CTEs the
// coordinator plans in steps); after one, the session runs every such call
// on the coordinator, which holds no shard ("not pushing down function calls
// in CTEs or Subqueries"). Claims therefore never share a session with
// commits.
type distribution struct {
	citus atomic.Bool
	// detected is whether detect has run: DeleteExpired, which may run
	// alone, detects when nothing did before.
	detected atomic.Bool

	mu sync.Mutex
	// claims is the claims' pool: two connections (the claim loop's, the
	// priority lane's), opened with the executor's pool's settings. Closed
	// when Run returns, and when PollOnce or DeleteExpired returns while no
	// Run runs.
	claims *pgxpool.Pool
	// runs counts the Runs under way.
	runs int

	// nodeKeys holds a key of each node with shards of the tasks (see
	// query.CitusNodeKeys), checked at every search of expired claims, and
	// read afresh after a failed call; turn rotates the node a claim
	// begins with.
	nodeKeys []tasks.ID
	turn     int
	// nodeTop is, per node key, the highest priority of the ready work the
	// node left at its last claim (-1: none): nodes go in its order.
	nodeTop map[tasks.ID]int16
}

// nodes returns a key of each node that holds shards of the tasks, read
// through sender when refresh asks or none is known. They come in the
// order of the highest priority of the ready work each left at its last
// claim (noteTop; a node not yet claimed on first, one that left none
// last), so that a node's urgent work goes before another's older work
// from the next claim on; among equals, rotated by one at every call, so
// that work on one node does not keep a claim from ever reaching the
// others.
func (d *distribution) nodes(ctx context.Context, sender batchSender, refresh bool) ([]tasks.ID, error) {
	d.mu.Lock()
	keys := d.nodeKeys
	d.mu.Unlock()
	if refresh || len(keys) == 0 {
		b := &pgx.Batch{}
		b.Queue(query.CitusNodeKeys, keys, query.CitusNodeSamples)
		br := sender.SendBatch(ctx, b)
		rows, err := br.Query()
		if err == nil {
			keys, err = pgx.CollectRows(rows, pgx.RowTo[tasks.ID])
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("read the nodes of the tasks' shards: %w", err)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.nodeKeys = keys
	d.turn++
	if len(keys) == 0 {
		return nil, nil
	}
	n := d.turn % len(keys)
	order := append(slices.Clone(keys[n:]), keys[:n]...)
	slices.SortStableFunc(order, func(a, b tasks.ID) int { return cmp.Compare(d.top(b), d.top(a)) })
	return order, nil
}

// top is what noteTop recorded of key's node, or, for a node not yet
// claimed on, more than any priority; d.mu is held.
func (d *distribution) top(key tasks.ID) int16 {
	if p, ok := d.nodeTop[key]; ok {
		return p
	}
	return math.MaxInt16
}

// noteTop records the highest priority of the ready work key's node left
// at its claim (-1: none).
func (d *distribution) noteTop(key tasks.ID, priority int16) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.nodeTop == nil {
		d.nodeTop = map[tasks.ID]int16{}
	}
	d.nodeTop[key] = priority
}

// forgetNodes drops the nodes' keys, after a call on one failed (a shard
// moved, a node removed): the next claim reads them again.
func (d *distribution) forgetNodes() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.nodeKeys, d.nodeTop = nil, nil
}

// begin counts a Run in, end out, closing the claims' pool after the last.
func (d *distribution) begin() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.runs++
}

func (d *distribution) end() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.runs--
	d.closeLocked()
}

// done closes the claims' pool unless a Run uses it: PollOnce and
// DeleteExpired call it as they return.
func (d *distribution) done() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closeLocked()
}

// closeLocked closes the claims' pool, if open and no Run uses it; d.mu is
// held.
func (d *distribution) closeLocked() {
	if d.claims != nil && d.runs == 0 {
		d.claims.Close()
		d.claims = nil
	}
}

// pool returns the claims' pool, opening it at first use.
func (d *distribution) pool(ctx context.Context, main *pgxpool.Pool) (*pgxpool.Pool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.claims != nil {
		return d.claims, nil
	}
	cfg := main.Config().Copy()
	cfg.MaxConns, cfg.MinConns = 2, 0
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open the claims' connections: %w", err)
	}
	d.claims = p
	return p, nil
}

// detect reads whether the tasks are distributed, and refuses a distributed
// database without this build's claim function (a database distributed,
// or migrated last, by another build: sql.Migrate makes it).
func (d *distribution) detect(ctx context.Context, db tasks.DB) error {
	distributed, err := corosql.Distributed(ctx, db)
	if err != nil {
		return dberr.Translate(err)
	}
	if distributed {
		var claims bool
		if err := db.QueryRow(ctx, query.ClaimShardExists()).Scan(&claims); err != nil {
			return fmt.Errorf("look for the claim function of this build: %w", dberr.Translate(err))
		}
		if !claims {
			return fmt.Errorf("executor: the tasks are distributed by Citus, but the database lacks this build's claim function: run corotask migrate (or sql.Migrate) with this build")
		}
	}
	d.citus.Store(distributed)
	d.detected.Store(true)
	return nil
}

// known is whether the tasks are distributed, detected first unless Run or
// PollOnce did.
func (d *distribution) known(ctx context.Context, db tasks.DB) (bool, error) {
	if !d.detected.Load() {
		if err := d.detect(ctx, db); err != nil {
			return false, err
		}
	}
	return d.citus.Load(), nil
}

// claimShards is claim on a distributed database: it claims on each worker
// in turn (query.ClaimNode, with a key of the worker: see
// distribution.nodes), until req is filled; each worker claims on its
// shards with work, the first work first. Each call is a transaction on
// its worker alone. It runs on one connection of the claims' pool, which
// holds the controls lock shared meanwhile (see query.CitusClaimBegin),
// and claims the types with flow controls after the others
// (claimControlled), shard by shard. The floors of readyFloors are not
// used: each search reads from a shard's oldest ready task.
func (cl *claimer) claimShards(ctx context.Context, req claimRequest) ([]*claimed, time.Time, error) {
	at := time.Now()
	if req.stale && cl.controlled.any() {
		// Controls set or cleared since are seen once per PollInterval.
		cl.learnControlled(ctx, req.all)
	}
	var from []pgtype.Timestamptz
	var minPriority int16
	if req.lane {
		from, minPriority = laneFloors(len(req.all)), 1
	}
	pool, err := cl.distribution.pool(ctx, cl.pool)
	if err != nil {
		return nil, time.Time{}, err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("claim: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, query.CitusClaimBegin, cl.cfg.HeartbeatTimeout.Milliseconds()); err != nil {
		// It may hold the lock: ending the session releases it.
		_ = conn.Conn().Close(context.WithoutCancel(ctx))
		return nil, time.Time{}, fmt.Errorf("claim: take the controls lock: %w", dberr.Translate(err))
	}
	defer func() {
		endCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cl.cfg.HeartbeatTimeout)
		defer cancel()
		if _, err := conn.Exec(endCtx, query.CitusClaimEnd); err != nil {
			_ = conn.Conn().Close(endCtx)
		}
	}()
	shards := shardClaim{sender: conn, from: from, minPriority: minPriority}
	out, next, err := cl.claimOverShards(ctx, shards, cl.withoutControlled(req), at)
	if err != nil {
		if len(out) == 0 {
			return nil, time.Time{}, err
		}
		// What was claimed is polled; the other types wait for the next claim.
		cl.log.Warn("corotask: claim on a distributed database", "error", err)
		return out, next, nil
	}
	if ctl := cl.onlyControlled(req.less(out)); ctl.total > 0 {
		got, ctlNext, err := cl.claimControlled(ctx, conn, shards, ctl, at)
		if err != nil {
			if len(out) == 0 {
				return nil, time.Time{}, err
			}
			// What the other types' claims took is claimed: poll it.
			cl.log.Warn("corotask: claim of the types with flow controls", "error", err)
		}
		out = append(out, got...)
		next = earliest(next, ctlNext)
	}
	return out, next, nil
}

// shardClaim is how claimOverShards claims: through sender (the
// connection that holds the controls lock), from the floors
// from, of tasks of priority minPriority and above; worker by worker
// (query.ClaimNode), or with counted set, shard by shard by
// query.ClaimShardCounted, whose claims of those types count toward their
// maximums, and whose tasks of the key spaces of keys wait while their
// key is at its limit.
type shardClaim struct {
	sender      batchSender
	from        []pgtype.Timestamptz
	minPriority int16
	counted     []string
	keys        *keyCounts
}

// batchSender is a pool or one of its connections.
type batchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// claimOverShards claims req worker by worker or, for sc.counted, shard
// by shard (see claimShards). It returns an error with claims only when the
// keys of sc.keys could not be counted after a shard's claim: the caller
// polls what it got, and claims no more.
func (cl *claimer) claimOverShards(ctx context.Context, sc shardClaim, req claimRequest, at time.Time) ([]*claimed, time.Time, error) {
	if req.total == 0 {
		return nil, time.Time{}, nil
	}
	// The keys to claim with: a key of each worker, or a root of each shard
	// with work.
	var (
		keys []tasks.ID
		next time.Time
		err  error
	)
	if sc.counted == nil {
		keys, err = cl.distribution.nodes(ctx, sc.sender, req.stale)
	} else {
		keys, next, err = cl.shardsWithWork(ctx, sc.sender, req, sc.minPriority, sc.keys.atLimit())
	}
	if err != nil {
		cl.hooks.claimDone(ctx, at, &req, 0, err)
		return nil, time.Time{}, fmt.Errorf("claim: %w", dberr.Translate(err))
	}
	if len(keys) == 0 {
		cl.hooks.claimDone(ctx, at, &req, 0, nil)
	}
	var out []*claimed
	for _, key := range keys {
		if req.total == 0 {
			break
		}
		res, err := cl.claimOn(ctx, sc, key, req, time.Now())
		if err != nil {
			if sc.counted == nil {
				cl.distribution.forgetNodes()
			}
			if len(out) > 0 {
				// What the calls before took is claimed: poll it.
				cl.log.Warn("corotask: claim on a worker or shard", "key", key, "error", err)
				break
			}
			return nil, time.Time{}, err
		}
		if sc.counted == nil {
			cl.distribution.noteTop(key, res.topPriority)
		}
		if res.gainedControls {
			cl.learnControlled(ctx, req.all)
			break
		}
		for i, c := range res.claimed {
			c.lane = req.lane
			if !res.takenOver[i] || !cl.exhausted(c) {
				out = append(out, c)
				continue
			}
			if err := cl.failClaimed(ctx, c); err != nil {
				cl.log.Error("corotask: end task whose polls keep stopping executors", "task", c.id, "type", c.typ, "error", err)
			}
		}
		next = earliest(next, res.next)
		if err := sc.keys.add(ctx, sc.sender, res.claimed); err != nil {
			// No later claim could count them: what was claimed is
			// polled, and the caller claims nothing more (claimControlled).
			return out, next, fmt.Errorf("claim: read the limit keys of a shard's claim: %w", dberr.Translate(err))
		}
		req = req.less(res.claimed)
	}
	return out, next, nil
}

// shardsWithWork is the first read of claimShards: a root of each shard
// that holds work for req, in the order of the work (priority, then age;
// expired claims after), passing over the ready tasks of the keys atLimit
// (query.CitusKeyAtLimit), and the earliest future wake_at of req's types.
func (cl *claimer) shardsWithWork(ctx context.Context, sender batchSender, req claimRequest, minPriority int16, atLimit []string) ([]tasks.ID, time.Time, error) {
	b := &pgx.Batch{}
	b.Queue(query.CitusShardsWithWork, req.all, req.total, req.stale, minPriority, atLimit)
	b.Queue(query.CitusNextWake, req.all)
	br := sender.SendBatch(ctx, b)
	defer br.Close()
	rows, err := br.Query()
	if err != nil {
		return nil, time.Time{}, err
	}
	var roots []tasks.ID
	seen := map[int64]bool{}
	for rows.Next() {
		var shard int64
		var root tasks.ID
		if err := rows.Scan(&shard, &root); err != nil {
			return nil, time.Time{}, err
		}
		if !seen[shard] {
			seen[shard] = true
			roots = append(roots, root)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, time.Time{}, err
	}
	var next *time.Time
	if err := br.QueryRow().Scan(&next); err != nil {
		return nil, time.Time{}, err
	}
	if next == nil {
		return roots, time.Time{}, nil
	}
	return roots, *next, nil
}

// claimOn claims what req allows on the shards of the worker that holds
// key's shard (query.ClaimNode) or, for sc.counted, on that shard alone,
// in a transaction on that worker, and reads it as claim reads Claim's
// rows.
func (cl *claimer) claimOn(ctx context.Context, sc shardClaim, key tasks.ID, req claimRequest, at time.Time) (claimResult, error) {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(query.CitusSettings)
	args := []any{key, req.open, req.total, req.capped, req.caps,
		cl.cfg.HeartbeatTimeout.Seconds(), req.all, cl.id, req.polling, req.window, sc.from, pgtype.Timestamptz{}, req.stale}
	if sc.counted != nil {
		b.Queue(query.ClaimShardCounted, append(args, append([]any{sc.counted}, sc.keys.args()...)...)...)
	} else {
		b.Queue(query.ClaimNode, append(args, sc.minPriority)...)
	}
	b.Queue("COMMIT")
	// Not canceled with ctx once sent, as claimWith's.
	sendCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cl.cfg.HeartbeatTimeout)
	defer cancel()
	br := sc.sender.SendBatch(sendCtx, b)
	res, err := readClaim(br, at, false, false)
	_ = br.Close()
	cl.hooks.claimDone(ctx, at, &req, len(res.claimed), err)
	if err != nil {
		return claimResult{}, fmt.Errorf("claim: %w", dberr.Translate(err))
	}
	return res, nil
}

// less is r after the tasks got were claimed: fewer in all, and fewer of
// each capped type. A capped type whose cap is spent stays, with a cap of
// 0: the claim takes none of it, where a type left out of the capped ones
// would be uncapped in the search of expired claims (all).
func (r claimRequest) less(got []*claimed) claimRequest {
	r.total -= len(got)
	if len(r.capped) == 0 || len(got) == 0 {
		return r
	}
	r.caps = slices.Clone(r.caps)
	for _, c := range got {
		if i := slices.Index(r.capped, string(c.typ)); i >= 0 && r.caps[i] > 0 {
			r.caps[i]--
		}
	}
	return r
}

// withoutControlled is req without the types known to have flow controls.
func (cl *claimer) withoutControlled(req claimRequest) claimRequest {
	if !cl.controlled.any() {
		return req
	}
	return req.only(func(typ string) bool { return !cl.controlled.has(tasks.Type(typ)) })
}

// only is r with only the types that keep keeps.
func (r claimRequest) only(keep func(typ string) bool) claimRequest {
	out := r
	out.open, out.capped, out.caps, out.all, out.window = nil, nil, nil, nil, nil
	for _, typ := range r.open {
		if keep(typ) {
			out.open = append(out.open, typ)
		}
	}
	for i, typ := range r.capped {
		if keep(typ) {
			out.capped, out.caps = append(out.capped, typ), append(out.caps, r.caps[i])
		}
	}
	for i, typ := range r.all {
		if keep(typ) {
			out.all, out.window = append(out.all, typ), append(out.window, r.window[i])
		}
	}
	if len(out.all) == 0 {
		out.total = 0
	}
	return out
}

// learnControlled records which of types have flow controls.
func (cl *claimer) learnControlled(ctx context.Context, types []string) {
	var held []string
	if err := cl.pool.QueryRow(ctx, query.CitusControlledTypes, types).Scan(&held); err != nil {
		cl.log.Warn("corotask: read the flow controls of the types polled", "error", err)
		return
	}
	cl.controlled.update(types, held)
}
