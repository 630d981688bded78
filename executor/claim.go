package executor

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/corotask/corotask/internal/dberr"
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
}

// claimsPerSlot bounds the claims an executor holds, in units of
// Concurrency: Concurrency polls running, and up to claimsPerSlot-1 times
// as many more whose polls have returned and wait for their batch to commit
// (settling). The keeper renews them all. While one batch commits, the polls
// that finish form the next, and the claims the settling ones hold are what
// lets the claim loop keep the slots full meanwhile: with room for
// Concurrency settling polls only, the claim loop of a busy executor waited
// for commits, and both its claims and its batches were smaller (see
// docs/benchmarks.md: 4 against 2 gave oneshot 7 – 11% and tree 4 – 8%).
const claimsPerSlot = 4

// claimRoom is how many more claims the executor may hold. e.mu is held.
func (e *Executor) claimRoom() int {
	return claimsPerSlot*e.cfg.Concurrency - len(e.inflight) - e.reserved
}

// request computes what the next claim may take from the free slots.
func (e *Executor) request() claimRequest {
	e.mu.Lock()
	defer e.mu.Unlock()
	// Tasks claimed earlier that wait for a slot (see start) go first.
	r := claimRequest{total: min(e.cfg.Concurrency-e.polling-len(e.waiting), e.claimRoom())}
	if r.total <= 0 {
		return claimRequest{}
	}
	for typ, h := range e.handlers {
		opts := h.options()
		limit := opts.concurrency
		if limit == 0 {
			r.open = append(r.open, string(typ))
			r.all, r.window = append(r.all, string(typ)), append(r.window, int32(opts.window()))
			continue
		}
		if free := limit - e.perType[typ] - e.waitingPerType[typ]; free > 0 {
			r.capped = append(r.capped, string(typ))
			r.caps = append(r.caps, int32(min(free, r.total)))
			r.all, r.window = append(r.all, string(typ)), append(r.window, int32(opts.window()))
		}
	}
	if len(r.all) == 0 {
		return claimRequest{}
	}
	// Stale claims are rare (a crashed or stalled executor) and looking for
	// them scans the index of running tasks, so it is done once per
	// PollInterval rather than at every claim.
	if now := time.Now(); now.Sub(e.lastStaleCheck) >= e.cfg.PollInterval {
		r.stale, e.lastStaleCheck = true, now
		for id, f := range e.inflight {
			if !f.settling {
				r.polling = append(r.polling, id)
			}
		}
	}
	return r
}

// claim claims what req allows, and returns the claimed tasks to poll and
// the earliest future wake_at (zero if none is known). The claim runs in its
// own transaction on its generic plan (see genericPlan); its statements go
// to the server as one pipeline, so the claim costs a single round trip.
// It reads the ready tasks from the oldest (a full claim), or from the
// floors of readyFloors, and counts the entries of the ready index it walks
// when readyFloors asks for it.
//
// A task taken over from an executor that stopped renewing its claim has had
// that attempt counted; one that thereby reached its type's MaxFailures is
// ended as failed here, not polled.
func (e *Executor) claim(ctx context.Context, req claimRequest) ([]*claimed, time.Time, error) {
	floors := &e.floors
	at := time.Now()
	from, staleFrom, full, count := floors.from(req, e.cfg.PollInterval, at)
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(genericPlan)
	if count {
		b.Queue(readyEntriesWalked)
	}
	b.Queue(claimSQL[req.stale], req.open, req.total, req.capped, req.caps,
		e.cfg.HeartbeatTimeout.Seconds(), req.all, e.id, req.polling, req.window, from, staleFrom)
	if count {
		b.Queue(readyEntriesWalked)
	}
	b.Queue("COMMIT")
	// Once sent, the claim is not canceled with ctx (Run stopping): one
	// canceled after the server committed it would leave tasks claimed that
	// no executor knows it holds, unpolled until their claims expire. It is
	// bounded by the heartbeat timeout instead, when they would expire
	// anyway. Waiting for a connection still ends with ctx.
	conn, err := e.pool.Acquire(ctx)
	if err != nil {
		e.hooks.claimDone(ctx, at, &req, 0, err)
		return nil, time.Time{}, fmt.Errorf("claim: %w", err)
	}
	defer conn.Release()
	sendCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.HeartbeatTimeout)
	defer cancel()
	sent := time.Now()
	br := conn.SendBatch(sendCtx, b)
	res, err := readClaim(br, at, count)
	took := time.Since(sent)
	// Once COMMIT's reply is read the claim is made, whatever closing the
	// batch then says: a connection killed right after it (the server ends
	// the session before its last reply) must not leave tasks claimed that
	// no executor polls until their claims expire.
	_ = br.Close()
	e.hooks.claimDone(ctx, at, &req, len(res.claimed), err)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("claim: %w", dberr.Translate(err))
	}
	switch floors.settle(req, res, full, count, at, took) {
	case floorModeStarted:
		e.log.Warn("corotask: claims walk index entries of ended tasks that no scan can mark dead, most likely because a transaction is held open; claims now start from the oldest ready task they last saw",
			"entries", res.walked)
	case floorModeEnded:
		e.log.Info("corotask: claims read from the oldest ready task again")
	}
	out := res.claimed
	poll := out[:0]
	for i, c := range out {
		if !res.takenOver[i] || !e.exhausted(c) {
			poll = append(poll, c)
			continue
		}
		if err := e.failClaimed(sendCtx, c); err != nil {
			// The claim is held: it expires, and the next takeover tries again.
			e.log.Error("corotask: end task whose polls keep stopping executors", "task", c.id, "type", c.typ, "error", err)
		}
	}
	return poll, res.next, nil
}

// exhausted reports whether c has failed as many times as its type allows.
func (e *Executor) exhausted(c *claimed) bool {
	e.mu.Lock()
	h := e.handlers[c.typ]
	e.mu.Unlock()
	limit := h.options().maxFailures
	return limit > 0 && c.failures >= limit
}

// failClaimed ends c as failed, without polling it, and tells its parent.
func (e *Executor) failClaimed(ctx context.Context, c *claimed) error {
	var ok bool
	if err := e.pool.QueryRow(ctx, `SELECT corotask.fail_claimed($1, $2)`, c.id, pgtype.UUID{Bytes: c.claim, Valid: true}).Scan(&ok); err != nil {
		e.schemaFault(err)
		return dberr.Translate(err)
	}
	if ok {
		e.log.Error("corotask: task failed for good: its polls stopped executors too many times", "task", c.id, "type", c.typ,
			"failures", c.failures, "error", takeoverError)
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
}

// readClaim reads the results of the claim's pipeline (with, if count, the
// counts of index entries around the claim's statement): the claimed tasks,
// whether each was taken over from an expired claim, the next wake_at and
// the floors. The claimed rows count only once the COMMIT has succeeded.
func readClaim(br pgx.BatchResults, at time.Time, count bool) (res claimResult, err error) {
	for range 2 { // BEGIN, the settings
		if _, err := br.Exec(); err != nil {
			return claimResult{}, err
		}
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
		)
		var more *bool
		if err := rows.Scan(&id, &typ, &c.parent, &c.state, &c.inbox, &c.seqs, &more, &token, &failures, &attempt, &stale, &wake, &c.trace, &floors, &sfloor); err != nil {
			return claimResult{}, err
		}
		if typ == nil {
			if wake != nil {
				res.next = *wake
			}
			res.floors, res.staleFloor = floors, sfloor
			continue
		}
		c.id, c.typ, c.claim, c.failures, c.attempt, c.claimedAt, c.takenOver = id, tasks.Type(*typ), token.Bytes, int(*failures), int(*attempt), at, *stale
		c.more = more != nil && *more
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

// readyFloors lets an executor's claims skip the entries of the ready index
// that no claim can use, and none can remove either.
//
// A claimed task leaves the ready index (tasks_ready_idx) with its new row
// version only: the entry of the version that was ready stays until vacuum
// removes that version, and meanwhile a claim that reads past it visits the
// heap to find it dead, unless a scan marked it dead once no transaction
// could see that version any more. A transaction that stays open (or a long
// REPEATABLE READ scan) holds that horizon back (for the marking, one in any
// database of the server): no version that ends after it began can be
// removed or marked, so every task claimed meanwhile leaves an entry at the
// head of its type's range in the index (the oldest wake_at, where a claim
// starts reading), and each claim walked them all (see docs/benchmarks.md).
// The search for stale claims walks the index of running tasks
// (tasks_running_idx) from its oldest expiry the same way.
//
// A claim may therefore start from a floor per type: a wake_at that no ready
// task of the type is older than, the late ones below aside. Each claim
// returns the next floors: the oldest ready task of each type in its
// snapshot (locked or not), but no later than floorMargin before its now().
// A task made ready after that snapshot is above that floor when its
// wake_at is in the future, or is the now() of a transaction that began
// less than floorMargin before the claim (a new task, Yield, Sleep, a
// backoff, a message to a suspended task). It is late (below) when its
// transaction began earlier than that, or when it gets an older wake_at: a
// released claim keeps the task's wake_at, and so do SleepUntil a past time
// and a task created with a past WakeAt. A full claim, which reads every
// type from its oldest ready task, finds late tasks. The search for stale
// claims has a floor too (see nextStaleFloor); a claim's expiry is only ever
// set to now() plus a HeartbeatTimeout, and only one set back by hand lands
// below it.
//
// Floors are used only while they pay (floor mode). Claims are full ones
// otherwise, as they always were, and a late task is claimed as soon as any
// other; once per PollInterval, the claim that looks for stale claims
// counts the entries of the ready index it walks. When they are more than
// floorModeEntries beyond those the claim could use, the next claim counts
// them too (the first may have walked the entries of tasks that ended just
// before, and marked them dead), and when it walks as many, the executor is
// in floor mode: its claims start from the floors, and a full claim, which
// costs as much as the entries it walks, runs at most once per
// fullClaimSpacing times the last one's duration (PollInterval at least),
// counting the entries again. A late task waits that long at most. Floor
// mode ends with a full claim that walks few.
type readyFloors struct {
	mu       sync.Mutex
	on       bool                 // floor mode
	suspect  bool                 // the last claim counted walked many entries
	at       map[string]time.Time // each type's floor, from the last claim that looked for it
	stale    pgtype.Timestamptz   // the floor of the search for stale claims
	lastFull time.Time            // when the last full claim in floor mode began ...
	fullTook time.Duration        // ... and how long it took
}

// floorModeEntries is how many more entries of the ready index than it
// could use a full claim walks when floor mode starts: about a millisecond's
// work.
const floorModeEntries = 2000

// fullClaimSpacing spaces full claims in floor mode, so that they take a
// twentieth of the claim loop's time at most; maxFullClaimSpacing bounds the
// spacing, in PollIntervals, so that a task made ready below its floor waits
// no longer than that however long the hold.
const (
	fullClaimSpacing    = 20
	maxFullClaimSpacing = 10
)

// oldest is the floor that reads from the oldest entry, and asks for the
// next floor.
var oldest = pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}

// from says what a claim of req that begins at now reads from: the types'
// floors (the statement's $10, in the order of req.all) and the floor of the
// search for stale claims ($11), NULL to read from the oldest entry and
// return no floor; whether the claim is full, and whether it counts the
// entries of the ready index it walks.
func (f *readyFloors) from(req claimRequest, pollInterval time.Duration, now time.Time) (floors []pgtype.Timestamptz, stale pgtype.Timestamptz, full, count bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.on {
		return nil, pgtype.Timestamptz{}, true, req.stale || f.suspect
	}
	stale = oldest
	if f.stale.Valid {
		stale = f.stale
	}
	if now.Sub(f.lastFull) >= max(pollInterval, min(fullClaimSpacing*f.fullTook, maxFullClaimSpacing*pollInterval)) {
		// The stale search reads from its oldest entry too: an expiry
		// below its floor is found here.
		return nil, oldest, true, true
	}
	floors = make([]pgtype.Timestamptz, len(req.all))
	for i, typ := range req.all {
		floors[i] = oldest
		if t, ok := f.at[typ]; ok {
			floors[i] = pgtype.Timestamptz{Time: t, Valid: true}
		}
	}
	return floors, stale, false, false
}

// A change of floor mode, as settle reports it.
const (
	floorModeKept = iota
	floorModeStarted
	floorModeEnded
)

// settle keeps the floors that a claim of req, begun at began, returned,
// and after a claim that counted the entries it walked, decides on floor
// mode. took is how long the claim's statements took (the wait for a
// connection not included).
func (f *readyFloors) settle(req claimRequest, res claimResult, full, counted bool, began time.Time, took time.Duration) (change int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(res.floors) == len(req.all) {
		for i, typ := range req.all {
			if res.floors[i].Valid {
				f.at[typ] = res.floors[i].Time
			}
		}
	}
	if res.staleFloor.Valid {
		f.stale = res.staleFloor
	}
	if !counted {
		return floorModeKept
	}
	// The entries a claim can use: up to total per search of a type
	// (open_quota, then open_ready or capped_ready), and one for its next
	// wake_at.
	usable := int64((len(req.all) + 2) * (req.total + 1))
	many := res.walked > floorModeEntries+usable
	switch {
	case !many:
		if f.on {
			change = floorModeEnded
		}
		f.on, f.suspect = false, false
	case !f.on && !f.suspect:
		// The entries may be of tasks that ended since the last claim, which
		// this claim has just marked dead: the next claim counts again.
		f.suspect = true
	case !f.on:
		// Floors kept from an earlier floor mode may lie above tasks made
		// ready since: the first claims look for them again.
		f.on, f.suspect = true, false
		f.at, f.stale = map[string]time.Time{}, pgtype.Timestamptz{}
		change = floorModeStarted
	}
	if full {
		f.lastFull, f.fullTook = began, took
	}
	return change
}
