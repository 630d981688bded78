package executor

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/corotask/corotask/internal/dberr"
	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/tasks"
)

// claimRequest says how many tasks to claim, and of which types.
type claimRequest struct {
	total  int
	open   []string // types without a concurrency cap
	capped []string // types with a cap and free slots ...
	caps   []int32  // ... and how many each may take
	all    []string // every type with a free slot (for stale claims) ...
	window []int32  // ... and how many messages a poll of each is shown
	stale  bool     // look for stale claims too ...
	// ... but not of the tasks this executor is polling: a poll that
	// ignores its context after its claim expired would have its task
	// taken back, given back and taken again at every search.
	polling []tasks.ID
	// share lets the claim hold its limited types' controls shared, far
	// from their maximum (see query.ClaimControls): the claim loop's
	// claims, one at a time, may; PollOnce's, which may run beside them,
	// may not.
	share bool
	// lane makes it a claim of the priority lane (see priorityLane): of
	// tasks above priority 0 only, and no stale search, floors aside.
	lane bool
}

// claimer claims tasks: it turns the free slots into a claim request, runs
// the claim statement, keeps the floors its searches start from (see
// readyFloors), and ends as failed the tasks taken over once too often.
// The claim loop (Run's own goroutine) and PollOnce ask it; its mutex
// guards lastStaleCheck, and the floors have their own.
type claimer struct {
	*env
	slots  *slots
	floors readyFloors

	mu sync.Mutex
	// lastStaleCheck is when a claim last looked for stale claims.
	lastStaleCheck time.Time
}

func newClaimer(v *env, s *slots) *claimer {
	return &claimer{env: v, slots: s, floors: readyFloors{at: map[string]time.Time{}}}
}

// request computes what the next claim may take from the free slots.
func (cl *claimer) request() claimRequest {
	r := cl.slots.request()
	if r.total == 0 {
		return r
	}
	// Stale claims are rare (a crashed or stalled executor) and looking for
	// them scans the index of running tasks, so it is done once per
	// PollInterval rather than at every claim.
	cl.mu.Lock()
	now := time.Now()
	due := now.Sub(cl.lastStaleCheck) >= cl.cfg.PollInterval
	if due {
		cl.lastStaleCheck = now
	}
	cl.mu.Unlock()
	if due {
		r.stale, r.polling = true, cl.slots.running()
	}
	return r
}

// claim claims what req allows, and returns the claimed tasks to poll and
// the earliest future wake_at (zero if none is known). The claim runs in its
// own transaction on its generic plan (see query.ClaimSettings); its statements go
// to the server as one pipeline, so the claim costs a single round trip.
// It reads the ready tasks from the oldest (a full claim), or from the
// floors of readyFloors, and counts the entries of the ready index it walks
// when readyFloors asks for it.
//
// A task taken over from an executor that stopped renewing its claim has had
// that attempt counted; one that thereby reached its type's MaxFailures is
// ended as failed here, not polled.
func (cl *claimer) claim(ctx context.Context, req claimRequest) ([]*claimed, time.Time, error) {
	// Types with flow controls (as the last claim found them) are claimed
	// by the statement that counts against them, after their controls are
	// locked; the other reads none of that, and claims nothing when a type
	// has gained controls (see claimWith).
	return cl.claimWith(ctx, req, claimHow{controlled: cl.controlled.any()})
}

// claimHow says which statements a claim sends.
type claimHow struct {
	// controlled: ClaimControls and ClaimControlled, not Claim.
	controlled bool
	// full: their full forms, and exclusive: their controls locked
	// exclusive, whatever the last claim noted (a claim made again at
	// once, after one whose notes said otherwise).
	full, exclusive bool
}

// claimWith is claim, by ClaimControlled (after ClaimControls) when
// how.controlled, else by Claim.
func (cl *claimer) claimWith(ctx context.Context, req claimRequest, how claimHow) ([]*claimed, time.Time, error) {
	if cl.distribution.citus.Load() {
		return cl.claimShards(ctx, req)
	}
	floors := &cl.floors
	at := time.Now()
	var from []pgtype.Timestamptz
	var staleFrom pgtype.Timestamptz
	var full, count bool
	if req.lane {
		from = laneFloors(len(req.all))
	} else {
		from, staleFrom, full, count = floors.from(req, cl.cfg.PollInterval, at)
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(query.ClaimSettings)
	// The smallest form of the claim for this request (see query.ClaimFor).
	stmt := query.ClaimFor(len(req.open) == 1, req.stale, from != nil)
	controlled := how.controlled
	lean := controlled && !how.full && cl.controlled.lean.Load()
	if controlled {
		stmt = query.ClaimControlledFor(req.stale, from != nil, lean)
		var claimer pgtype.UUID
		if req.share && !how.exclusive && cl.controlled.room.Load() {
			claimer = pgtype.UUID{Bytes: cl.id, Valid: true}
		}
		b.Queue(query.ClaimControlsFor(lean), req.all, claimer)
	}
	if count {
		b.Queue(query.ClaimReadyEntriesWalked)
	}
	b.Queue(stmt, req.open, req.total, req.capped, req.caps,
		cl.cfg.HeartbeatTimeout.Seconds(), req.all, cl.id, req.polling, req.window, from, staleFrom, req.stale)
	if count {
		b.Queue(query.ClaimReadyEntriesWalked)
	}
	b.Queue("COMMIT")
	// Once sent, the claim is not canceled with ctx (Run stopping): one
	// canceled after the server committed it would leave tasks claimed that
	// no executor knows it holds, unpolled until their claims expire. It is
	// bounded by the heartbeat timeout instead, when they would expire
	// anyway. Waiting for a connection still ends with ctx.
	conn, err := cl.pool.Acquire(ctx)
	if err != nil {
		cl.hooks.claimDone(ctx, at, &req, 0, err)
		return nil, time.Time{}, fmt.Errorf("claim: %w", err)
	}
	defer conn.Release()
	sendCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cl.cfg.HeartbeatTimeout)
	defer cancel()
	sent := time.Now()
	br := conn.SendBatch(sendCtx, b)
	res, err := readClaim(br, at, count, controlled)
	if err == nil && controlled {
		cl.controlled.update(req.all, res.controlled)
		cl.controlled.noted(res.notes)
	}
	took := time.Since(sent)
	// Once COMMIT's reply is read the claim is made, whatever closing the
	// batch then says: a connection killed right after it (the server ends
	// the session before its last reply) must not leave tasks claimed that
	// no executor polls until their claims expire.
	_ = br.Close()
	cl.hooks.claimDone(ctx, at, &req, len(res.claimed), err)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("claim: %w", dberr.Translate(err))
	}
	if lean && res.notes&query.ClaimNoteLimits != 0 && len(res.claimed) == 0 {
		// A type polled has gained a key space or a rate limit, which the
		// lean form does not count: it took nothing, and the claim is made
		// again with the full form, on a connection acquired anew, as
		// below.
		conn.Release()
		return cl.claimWith(ctx, req, claimHow{controlled: true, full: true, exclusive: how.exclusive})
	}
	if res.shared && len(res.claimed) == 0 && res.notes&query.ClaimNoteRoom == 0 {
		// Held shared on a note of room that other executors' claims have
		// taken since, the claim took nothing: near the maximum, claims
		// take turns, and this one is made again at once, exclusive, for
		// the slots left (rather than after a poll of this executor ends,
		// or PollInterval).
		conn.Release()
		return cl.claimWith(ctx, req, claimHow{controlled: true, full: how.full, exclusive: true})
	}
	if controlled && !req.lane {
		cl.controlled.short.Store(len(res.claimed) < req.total)
	}
	if !controlled && res.gainedControls {
		// A type polled has gained flow controls: Claim took nothing, and
		// the claim is made again, by ClaimControlled, on a connection it
		// acquires once this one is back in the pool (executors that
		// share a small pool would otherwise each hold one and wait for
		// another).
		conn.Release()
		return cl.claimWith(ctx, req, claimHow{controlled: true})
	}
	if req.lane {
		for _, c := range res.claimed {
			c.lane = true
		}
		return res.claimed, res.next, nil // never a takeover: no stale search
	}
	switch floors.settle(req, res, full, count, at, took) {
	case floorModeStarted:
		cl.log.Warn("corotask: claims walk index entries of ended tasks that no scan can mark dead, most likely because a transaction is held open; claims now start from the oldest ready task they last saw",
			"entries", res.walked)
	case floorModeEnded:
		cl.log.Info("corotask: claims read from the oldest ready task again")
	}
	out := res.claimed
	poll := out[:0]
	for i, c := range out {
		if !res.takenOver[i] || !cl.exhausted(c) {
			poll = append(poll, c)
			continue
		}
		if err := cl.failClaimed(sendCtx, c); err != nil {
			// The claim is held: it expires, and the next takeover tries again.
			cl.log.Error("corotask: end task whose polls keep stopping executors", "task", c.id, "type", c.typ, "error", err)
		}
	}
	return poll, res.next, nil
}

// exhausted reports whether c has failed as many times as its type allows.
func (cl *claimer) exhausted(c *claimed) bool {
	h, _ := cl.pollers.get(c.typ)
	limit := h.options().maxFailures
	return limit > 0 && c.failures >= limit
}

// failClaimed ends c as failed, without polling it, and tells its parent.
func (cl *claimer) failClaimed(ctx context.Context, c *claimed) error {
	var ok bool
	if err := cl.pool.QueryRow(ctx, query.ClaimFail, c.id, pgtype.UUID{Bytes: c.claim, Valid: true}).Scan(&ok); err != nil {
		cl.schema.fault(err)
		return dberr.Translate(err)
	}
	if ok {
		cl.log.Error("corotask: task failed for good: its polls stopped executors too many times", "task", c.id, "type", c.typ,
			"failures", c.failures, "error", query.ClaimTakeoverError)
	}
	return nil
}

// claimResult is what a claim's pipeline returned.
type claimResult struct {
	claimed   []*claimed
	takenOver []bool    // per claimed task: taken over from an expired claim
	next      time.Time // the earliest future wake_at, zero if none
	// floors are the types' next floors, in the order of the request's
	// all, and staleFloor the next floor of the search for stale claims
	// (nil, NULL, unless asked for; see readyFloors).
	floors     []pgtype.Timestamptz
	staleFloor pgtype.Timestamptz
	// walked is how many entries of the ready index the claim walked (if
	// counted).
	walked int64
	// controlled is the types of the request with flow controls (read by
	// ClaimControls), and gainedControls whether Claim found some (and so
	// claimed nothing).
	controlled     []string
	gainedControls bool
	// notes are ClaimControlled's notes for the next claim
	// (query.ClaimNoteLimits, query.ClaimNoteRoom), and shared whether
	// ClaimControls held the controls shared.
	notes  int16
	shared bool
	// topPriority is, after a claim on a Citus worker (query.ClaimNode),
	// the highest priority of the ready work it left on its shards, and -1
	// when none.
	topPriority int16
}

// readClaim reads the results of the claim's pipeline (with, if count, the
// counts of index entries around the claim's statement): the claimed tasks,
// whether each was taken over from an expired claim, the next wake_at and
// the floors. The claimed rows count only once the COMMIT has succeeded.
func readClaim(br pgx.BatchResults, at time.Time, count, controlled bool) (res claimResult, err error) {
	for range 2 { // BEGIN, the settings
		if _, err := br.Exec(); err != nil {
			return claimResult{}, err
		}
	}
	if controlled {
		var locked int64
		var shared string
		if err := br.QueryRow().Scan(&res.controlled, &locked, &shared); err != nil { // ClaimControls
			return claimResult{}, err
		}
		res.shared = shared == "true"
	}
	var before, after int64
	if count {
		if err := br.QueryRow().Scan(&before); err != nil {
			return claimResult{}, err
		}
	}
	rows, err := br.Query()
	if err != nil {
		return claimResult{}, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id       tasks.ID
			typ      *string
			c        claimed
			token    pgtype.UUID
			failures *int32
			attempt  *int32
			stale    *bool
			wake     *time.Time
			floors   []pgtype.Timestamptz
			sfloor   pgtype.Timestamptz
			key      *string
			woke     *int16
		)
		var more *bool
		if err := rows.Scan(&id, &typ, &c.parent, &c.root, &c.state, &c.inbox, &c.seqs, &more, &token, &failures, &attempt, &stale, &wake, &c.trace, &floors, &sfloor, &key, &woke); err != nil {
			return claimResult{}, err
		}
		if typ == nil {
			if wake != nil {
				res.next = *wake
			}
			res.topPriority = -1
			if failures != nil { // ClaimNode's last row: see there
				res.topPriority = int16(*failures)
			}
			res.floors, res.staleFloor = floors, sfloor
			switch {
			case woke != nil && controlled:
				res.notes = *woke
			case woke != nil: // Claim (or a Citus worker's): a type polled has gained controls
				res.gainedControls = true
			}
			continue
		}
		c.id, c.typ, c.claim, c.failures, c.attempt, c.claimedAt, c.takenOver = id, tasks.Type(*typ), token.Bytes, int(*failures), int(*attempt), at, *stale
		c.more = more != nil && *more
		if wake != nil { // a claimed row: the database's time
			c.now = *wake
		}
		if woke != nil {
			c.woke = WakeReasons(*woke)
		}
		if key != nil {
			c.key = *key
		}
		res.claimed, res.takenOver = append(res.claimed, &c), append(res.takenOver, *stale)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return claimResult{}, err
	}
	if count {
		if err := br.QueryRow().Scan(&after); err != nil {
			return claimResult{}, err
		}
		res.walked = after - before
	}
	if _, err := br.Exec(); err != nil { // COMMIT
		return claimResult{}, err
	}
	return res, nil
}
