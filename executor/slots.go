package executor

import (
	"context"
	"sync"

	"github.com/corotask/corotask/tasks"
)

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

// flight is one claim the executor works on.
type flight struct {
	c        *claimed
	h        handler
	ctx      context.Context // the poll's (as the hooks returned it, once it started)
	cancel   context.CancelCauseFunc
	pollCtx  context.Context // the poller's: ctx, or one under it that its type's PollTimeout cancels
	deadline *pollDeadline   // that PollTimeout's; nil without one
	settling bool            // the poll returned; its outcome is being committed
	lane     bool            // the poll holds a priority slot (Config.PrioritySlots)
}

// slots counts the executor's claims against its limits: Concurrency,
// each type's MaxConcurrency, and claimsPerSlot. It alone owns the counters,
// under its own mutex, and every goroutine asks it: the claim loop (request,
// take), the polls' goroutines (polled, done, takeWaiting), the committers
// (reserve and unreserve slots for eager children), the listener (find) and
// Run (open, stop). Nothing here runs a statement or starts a goroutine:
// the methods that free a slot return the flights the caller then starts.
type slots struct {
	*env
	beats *heartbeats

	mu sync.Mutex
	// inflight holds every claim this executor works on: polls running and
	// polls whose outcome is being committed (settling).
	inflight map[tasks.ID]*flight
	polling  int                // polls running, counted against Concurrency
	lane     int                // polls running in priority slots, against PrioritySlots
	perType  map[tasks.Type]int // polls running per type, against MaxConcurrency
	// waiting holds claimed tasks that found no slot (see take), in claim
	// order, and waitingPerType counts them by type; they are in inflight,
	// and their claims are renewed.
	waiting        []*flight
	waitingPerType map[tasks.Type]int
	// reserved counts slots held for children a batch's commit creates
	// claimed (see eager.go); they are counted in polling and perType too.
	reserved int
	// pollBase is the parent of the polls' contexts while Run runs; stopping
	// is set once Run claims no more, and no poll may start after it.
	pollBase context.Context
	stopping bool
}

func newSlots(v *env, beats *heartbeats) *slots {
	return &slots{env: v, beats: beats, inflight: map[tasks.ID]*flight{},
		perType: map[tasks.Type]int{}, waitingPerType: map[tasks.Type]int{}}
}

// open lets polls start, as children of pollBase.
func (s *slots) open(pollBase context.Context) {
	s.mu.Lock()
	s.pollBase, s.stopping = pollBase, false
	s.mu.Unlock()
}

// stop lets no more polls start, and returns the flights that waited for a
// slot, forgotten: their claims are the caller's to give back.
func (s *slots) stop() []*flight {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopping = true
	fs := s.waiting
	s.waiting = nil
	clear(s.waitingPerType)
	for _, f := range fs {
		if s.inflight[f.c.id] == f {
			delete(s.inflight, f.c.id)
		}
	}
	return fs
}

// claimRoom is how many more claims the executor may hold. s.mu is held.
func (s *slots) claimRoom() int {
	return claimsPerSlot*(s.cfg.Concurrency+s.cfg.PrioritySlots) - len(s.inflight) - s.reserved
}

// request computes what the next claim may take from the free slots: how
// many in all, of which types, and how many of each capped type. The
// search for stale claims is the claimer's to add.
func (s *slots) request() claimRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Tasks claimed earlier that wait for a slot (see take) go first.
	return s.requestOf(s.cfg.Concurrency - s.polling - len(s.waiting))
}

// laneRequest is request for the priority slots (see priorityLane): what
// a claim of tasks above priority 0 may take into the free ones.
func (s *slots) laneRequest() claimRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.requestOf(s.cfg.PrioritySlots - s.lane)
	r.lane = true
	return r
}

// requestOf is a request of up to free tasks, within the claims the
// executor may hold and each capped type's free slots. s.mu is held.
func (s *slots) requestOf(free int) claimRequest {
	r := claimRequest{total: min(free, s.claimRoom())}
	if r.total <= 0 {
		return claimRequest{}
	}
	s.pollers.each(func(typ tasks.Type, h handler) {
		opts := h.options()
		limit := opts.concurrency
		if limit == 0 {
			r.open = append(r.open, string(typ))
			r.all, r.window = append(r.all, string(typ)), append(r.window, int32(opts.window()))
			return
		}
		if free := limit - s.perType[typ] - s.waitingPerType[typ]; free > 0 {
			r.capped = append(r.capped, string(typ))
			r.caps = append(r.caps, int32(min(free, r.total)))
			r.all, r.window = append(r.all, string(typ)), append(r.window, int32(opts.window()))
		}
	})
	if len(r.all) == 0 {
		return claimRequest{}
	}
	return r
}

// running returns the tasks whose polls run or wait for a slot: every
// claim in flight but the settling ones.
func (s *slots) running() []tasks.ID {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []tasks.ID
	for id, f := range s.inflight {
		if !f.settling {
			ids = append(ids, id)
		}
	}
	return ids
}

// take counts a claimed task in. It refuses it (old, the flight of the
// task's poll this executor still runs) when the task's heartbeat went
// stale while polled here and the claim loop took it again. Else it
// returns the task's flight, admitted (run: the caller launches it) or, when
// no slot is free, waiting for one with its claim renewed: the claim counted
// the free slots before it ran, and a batch's eager children may have taken
// some meanwhile.
func (s *slots) take(c *claimed) (f, old *flight, run bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.inflight[c.id]; ok && (!old.settling || c.takenOver) {
		return nil, old, false
	}
	// Else any earlier flight of the task has returned and its outcome is
	// written (the task was claimed without a takeover, so its claim was
	// gone): its goroutine is only forgetting it, and leaves this claim be.
	f = s.newFlight(c)
	if s.seat(f) {
		return f, nil, true
	}
	s.waiting = append(s.waiting, f)
	s.waitingPerType[c.typ]++
	// Renewed from now on; under s.mu, so that the flight cannot start,
	// end and be removed from the keeper before it is added.
	s.beats.add(c, c.claimedAt, f.cancel)
	return f, nil, false
}

// seat counts f's poll as running in a free slot, if there is one within
// its type's MaxConcurrency: a priority slot for a task the priority lane
// claimed, while one is free, else one of Concurrency. s.mu is held.
func (s *slots) seat(f *flight) bool {
	if s.typeFull(f.c.typ) {
		return false
	}
	switch {
	case f.c.lane && s.lane < s.cfg.PrioritySlots:
		f.lane = true
		s.lane++
	case s.polling < s.cfg.Concurrency:
		s.polling++
	default:
		return false
	}
	s.perType[f.c.typ]++
	return true
}

// typeFull reports whether typ's polls are at its MaxConcurrency. s.mu is
// held.
func (s *slots) typeFull(typ tasks.Type) bool {
	h, _ := s.pollers.get(typ)
	limit := h.options().concurrency
	return limit > 0 && s.perType[typ] >= limit
}

// newFlight counts c's claim in flight. s.mu is held.
func (s *slots) newFlight(c *claimed) *flight {
	pctx, cancel := context.WithCancelCause(s.pollBase)
	h, _ := s.pollers.get(c.typ)
	f := &flight{c: c, h: h, ctx: pctx, cancel: cancel}
	s.inflight[c.id] = f
	return f
}

// admit counts c's poll in flight and running. s.mu is held.
func (s *slots) admit(c *claimed) *flight {
	f := s.newFlight(c)
	s.polling++
	s.perType[c.typ]++
	return f
}

// takeWaiting takes the waiting tasks that now have a slot, in claim order,
// counting their polls as running, and those whose claim was lost or
// canceled while they waited (nothing of them was polled, so nothing is
// written). s.mu is held; the caller then starts or forgets them (see
// polls.startWaiting).
func (s *slots) takeWaiting() (run, gone []*flight) {
	if len(s.waiting) == 0 || s.stopping || s.schema.faulted.Load() {
		return nil, nil
	}
	kept := s.waiting[:0]
	for _, f := range s.waiting {
		switch {
		case context.Cause(f.ctx) != nil:
			if s.inflight[f.c.id] == f {
				delete(s.inflight, f.c.id)
			}
			gone = append(gone, f)
		case s.seat(f):
			run = append(run, f)
		default:
			kept = append(kept, f)
			continue
		}
		s.waitingPerType[f.c.typ]--
	}
	clear(s.waiting[len(kept):])
	s.waiting = kept
	return run, gone
}

// polled frees the slot of c's poll, which returned, and returns the
// waiting tasks to start or forget (see takeWaiting).
func (s *slots) polled(c *claimed) (run, gone []*flight) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.inflight[c.id]; ok && f.c == c {
		s.freeSlot(f)
	}
	return s.takeWaiting()
}

// done forgets c's claim, whose poll has settled, and returns the waiting
// tasks to start or forget (see takeWaiting).
func (s *slots) done(c *claimed) (run, gone []*flight) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.inflight[c.id]; ok && f.c == c {
		delete(s.inflight, c.id)
		s.freeSlot(f)
	}
	return s.takeWaiting()
}

// freeSlot stops counting f's poll as running, once. s.mu is held.
func (s *slots) freeSlot(f *flight) {
	if f.settling {
		return
	}
	f.settling = true
	s.perType[f.c.typ]--
	if !f.lane {
		s.polling--
		return
	}
	s.lane--
	s.signalLane()
}

// find returns the flight of task id, if any.
func (s *slots) find(id tasks.ID) (*flight, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.inflight[id]
	return f, ok
}

// flights returns every claim in flight, as they are now.
func (s *slots) flights() []*flight {
	s.mu.Lock()
	defer s.mu.Unlock()
	fs := make([]*flight, 0, len(s.inflight))
	for _, f := range s.inflight {
		fs = append(fs, f)
	}
	return fs
}

// count is how many claims are in flight.
func (s *slots) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.inflight)
}

// reserve reserves slots for the children of a batch of leaving polls
// (their claims end with the batch's commit, so their children may take
// their places), while Run runs: pick calls take for each candidate child's
// type, in order, and take reports whether a slot was reserved (within
// Concurrency, the type's MaxConcurrency and the bound on claims; tasks
// claimed earlier that wait for a slot go first). It reports false when
// polls may not start.
func (s *slots) reserve(leaving int, pick func(take func(tasks.Type) bool)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping || s.pollBase == nil {
		return false
	}
	free := min(s.cfg.Concurrency-s.polling-len(s.waiting), s.claimRoom()+leaving)
	pick(func(typ tasks.Type) bool {
		if free <= 0 {
			return false
		}
		h, ok := s.pollers.get(typ)
		if !ok {
			return false
		}
		if limit := h.options().concurrency; limit > 0 && s.perType[typ]+s.waitingPerType[typ] >= limit {
			return false
		}
		s.polling++
		s.perType[typ]++
		s.reserved++
		free--
		return true
	})
	return true
}

// unreserve gives back the slots reserved for children of types, and
// admits the children cs (those created; each of them had one of the
// slots) unless Run is stopping. It returns their flights to launch, and
// the waiting tasks the other slots go to (see takeWaiting).
func (s *slots) unreserve(types []tasks.Type, cs []*claimed) (fs []*flight, stopping bool, run, gone []*flight) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, typ := range types {
		s.polling--
		s.perType[typ]--
		s.reserved--
	}
	if !s.stopping {
		fs = make([]*flight, 0, len(cs))
		for _, c := range cs {
			fs = append(fs, s.admit(c))
		}
	}
	run, gone = s.takeWaiting()
	return fs, s.stopping, run, gone
}
