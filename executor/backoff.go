package executor

import (
	"math/rand/v2"
	"time"
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
