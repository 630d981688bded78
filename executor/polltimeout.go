package executor

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/corotask/corotask/tasks"
)

// pollDeadline enforces a type's PollTimeout on one poll. The poll runs in
// a context of its own, under the flight's, which the deadline cancels: the
// flight's context, which settle reads, keeps the causes the executor
// gives it (shutdown, a lost claim, a cancel), and those win over a
// timeout. Whether the poll timed out is decided once, by whichever comes
// first of the timer and the poll's return, so a poll that returns in time
// is never failed by a timer that fires as it settles.
type pollDeadline struct {
	cancel context.CancelCauseFunc
	cause  error
	timer  *time.Timer
	state  atomic.Int32 // deadlineRunning, then deadlineReturned or deadlineExpired
}

const (
	deadlineRunning int32 = iota
	deadlineReturned
	deadlineExpired
)

// withPollTimeout returns the context a poll of typ runs in, and its
// deadline: ctx itself and nil when d is 0 (no timeout).
func withPollTimeout(ctx context.Context, d time.Duration, typ tasks.Type) (context.Context, *pollDeadline) {
	if d <= 0 {
		return ctx, nil
	}
	ctx, cancel := context.WithCancelCause(ctx)
	pd := &pollDeadline{cancel: cancel, cause: fmt.Errorf("%w after %s (the PollTimeout of %s)", ErrPollTimeout, d, typ)}
	pd.timer = time.AfterFunc(d, pd.expire)
	return ctx, pd
}

func (pd *pollDeadline) expire() {
	if pd.state.CompareAndSwap(deadlineRunning, deadlineExpired) {
		pd.cancel(pd.cause)
	}
}

// returned ends the deadline of a poll that returned out: it returns out,
// or the timeout's failure in its place when the deadline passed first.
// The poll's context is canceled either way: the poll is over.
func (pd *pollDeadline) returned(out *outcome) *outcome {
	if pd == nil {
		return out
	}
	pd.timer.Stop()
	if pd.state.CompareAndSwap(deadlineRunning, deadlineReturned) {
		pd.cancel(nil)
		return out
	}
	// The timer may still be about to cancel: the cause is set here too.
	pd.cancel(pd.cause)
	return &outcome{err: pd.cause}
}

// stop ends the deadline of a poll whose goroutine ended (see polls.run),
// whether it returned (returned did it all) or not.
func (pd *pollDeadline) stop() {
	if pd != nil && pd.state.CompareAndSwap(deadlineRunning, deadlineReturned) {
		pd.timer.Stop()
		pd.cancel(nil)
	}
}
