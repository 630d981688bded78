package executor

import (
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

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
// snapshot (locked or not), but no later than the floor margin (a second, see query.Claim)
// before its now().
// A task made ready after that snapshot is above that floor when its
// wake_at is in the future, or is the now() of a transaction that began
// less than the floor margin before the claim (a new task, Yield, Sleep, a
// backoff, a message to a suspended task). It is late (below) when its
// transaction began earlier than that, or when it gets an older wake_at: a
// released claim keeps the task's wake_at, and so do SleepUntil a past time
// and a task created with a past WakeAt. A full claim, which reads every
// type from its oldest ready task, finds late tasks. The search for stale
// claims has a floor too (see query.Claim); a claim's expiry is only ever
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
	// (open_quota, then ready), and one for its next wake_at.
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
