package executor

import (
	"sync/atomic"

	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/tasks"
)

// controlledTypes is the set of this executor's types that have flow
// controls in the database (a pause, a fleet-wide maximum, a key space or a
// rate limit: corotask.type_controls), as the last claim found them. Only a
// claim may start a poll of such a type, after counting against its limits:
// a batch's commit creates no eager child of one (see eager.go). A control
// set since the last claim is caught by the commit itself, which creates
// such a child ready instead (see commit_polls).
type controlledTypes struct {
	set atomic.Pointer[map[tasks.Type]bool]
	// short is whether the last claim of controlled types took fewer
	// tasks than it asked for: limits may hold tasks back, and a slot
	// freed under them is worth a claim (see committer.settle).
	short atomic.Bool
	// lean is whether the last claim made with ClaimControlled (the claim
	// loop's, the priority lane's or PollOnce's) found only pauses and
	// maximums among the types it asked about (no key space, no rate
	// limit): the next claims with the lean forms of the statements, which
	// cost less (see query.ClaimControlledFor). One that finds a key space
	// or a rate limit all the same takes nothing, and is made again with
	// the full forms (see claimWith).
	lean atomic.Bool
	// room is whether that claim found room for shared claims
	// (query.ClaimNoteRoom): the claim loop's next claim asks to hold the
	// controls shared. One that finds the room taken meanwhile takes what
	// is left of a share, or, taking nothing, is made again at once,
	// exclusive.
	room atomic.Bool
}

// noted records the notes of a claim of controlled types (see
// query.ClaimNoteLimits and query.ClaimNoteRoom).
func (c *controlledTypes) noted(notes int16) {
	c.lean.Store(notes&query.ClaimNoteLimits == 0)
	c.room.Store(notes&query.ClaimNoteRoom != 0)
}

// update records what a claim found of the types it asked about (asked):
// those of them with controls (types); the others keep what an earlier
// claim found (a type with no free slot is not asked about).
//
// The claim loop, the priority lane and PollOnce may claim at once: an
// update made meanwhile is merged into, not overwritten.
func (c *controlledTypes) update(asked, types []string) {
	for {
		old := c.set.Load()
		if len(types) == 0 && (old == nil || len(*old) == 0) {
			return
		}
		m := make(map[tasks.Type]bool, len(types))
		if old != nil {
			for t := range *old {
				m[t] = true
			}
		}
		for _, t := range asked {
			delete(m, tasks.Type(t))
		}
		for _, t := range types {
			m[tasks.Type(t)] = true
		}
		if c.set.CompareAndSwap(old, &m) {
			return
		}
	}
}

// has reports whether typ had controls at the last claim.
func (c *controlledTypes) has(typ tasks.Type) bool {
	m := c.set.Load()
	return m != nil && (*m)[typ]
}

// any reports whether some type had controls at the last claim.
func (c *controlledTypes) any() bool {
	m := c.set.Load()
	return m != nil && len(*m) > 0
}
