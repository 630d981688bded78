package executor

import (
	"math/rand/v2"
	"time"

	"github.com/corotask/corotask/internal/dberr"
)

// backoff returns the delay before retry number attempt (1 is the first):
// base doubled per attempt, capped at limit, with "equal jitter" (half fixed,
// half random) so that many tasks failing together do not retry together.
func backoff(base, limit time.Duration, attempt int) time.Duration {
	d := base
	for i := 1; i < attempt && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	half := d / 2
	if half <= 0 {
		return d
	}
	return half + rand.N(half+1)
}

// atOnce reports whether a statement that failed with err, for the n-th time
// in a row with its connection severed (see dberr.Severed), is tried again
// at once on another connection rather than after a backoff: up to one more
// time than the pool has connections, so that a pool whose every idle
// connection was killed (a failover, a pooler's restart) is run through
// first.
func (e *Executor) atOnce(err error, n int) bool {
	return dberr.Severed(err) && n <= e.severedRetries()
}
