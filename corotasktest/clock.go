package corotasktest

import (
	"fmt"
	"sync"
	"time"
)

// Clock is a clock the test moves: it starts at the time NewClock is
// called and changes only when told, never backwards. It is safe for
// concurrent use. Make one with NewClock: the zero Clock reads the zero
// time.
//
// Give it to NewDB (WithClock), and the database reads it: the claims of an
// executor on that pool see a task as ready, a claim as expired, and a
// retained task as due for deletion by the clock; Sleep, a failed poll's
// backoff and a task's end are counted from it. So a task that sleeps an
// hour is ready once the test advances the clock an hour, and polled by the
// next RunUntilIdle. Timestamps kept for people (a claim's claimed_at, a
// heartbeat, a message's time, the executors table) stay on the server's
// clock.
//
// Drive the executor with RunUntilIdle (or PollOnce), not Run: a poll then
// starts and commits between two moves of the clock. Run's own loops keep
// the wall clock: its heartbeats renew claims on a connection outside the
// pool, which reads the server's time, so once the clock is ahead by more
// than HeartbeatTimeout its claims look expired and are taken over; and its
// claim loop, waiting for the next wake_at by the wall clock, would claim in
// a tight loop while the test clock stands still.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock set to the current time, to the microsecond
// (PostgreSQL's precision, so that a time read back from the database
// equals the clock's) and without a monotonic reading (so that times
// compare with ==).
func NewClock() *Clock {
	return &Clock{now: time.Now().Round(0).Truncate(time.Microsecond)}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (to the microsecond, as the
// database keeps times) and returns the new time. It panics when d is
// negative: the clock never goes back.
func (c *Clock) Advance(d time.Duration) time.Time {
	if d < 0 {
		panic(fmt.Sprintf("corotasktest: Clock.Advance(%s): the clock never goes back", d))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d).Truncate(time.Microsecond)
	return c.now
}

// Set moves the clock forward to t (to the microsecond). It panics when t
// is before the clock's time: the clock never goes back.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.Before(c.now) {
		panic(fmt.Sprintf("corotasktest: Clock.Set(%s): before the clock's time %s; the clock never goes back",
			t.Format(time.RFC3339Nano), c.now.Format(time.RFC3339Nano)))
	}
	c.now = t.Round(0).Truncate(time.Microsecond)
}
