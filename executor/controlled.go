package executor

import (
	"sync/atomic"

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
}

// update records the controlled types a claim returned.
func (c *controlledTypes) update(types []string) {
	if len(types) == 0 {
		if m := c.set.Load(); m != nil && len(*m) > 0 {
			c.set.Store(nil)
		}
		return
	}
	m := make(map[tasks.Type]bool, len(types))
	for _, t := range types {
		m[tasks.Type(t)] = true
	}
	c.set.Store(&m)
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
