package executor

import (
	"context"
	"time"
)

// every runs fn every d until ctx ends or fn returns false: the executor's
// background chores (registration, retention, vacuum) are each one such loop.
func every(ctx context.Context, d time.Duration, fn func(context.Context) bool) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !fn(ctx) {
			return
		}
	}
}
