package corotasktest

import (
	"context"
	"errors"
	"fmt"

	"github.com/corotask/corotask/executor"
)

// DefaultMaxPolls is how many polls RunUntilIdle runs at most when no
// MaxPolls is given.
const DefaultMaxPolls = 10_000

// ErrNotIdle is the error of RunUntilIdle when tasks are still ready after
// its limit of polls: a workflow that never settles (a task that yields or
// sends to itself for ever), or one larger than the limit.
var ErrNotIdle = errors.New("corotasktest: tasks still ready")

// RunOption configures RunUntilIdle.
type RunOption func(*runOptions)

type runOptions struct {
	maxPolls int
}

// MaxPolls bounds how many polls RunUntilIdle runs (DefaultMaxPolls when
// not given). It returns ErrNotIdle once it has run more than n polls
// and tasks are still ready.
func MaxPolls(n int) RunOption { return func(o *runOptions) { o.maxPolls = n } }

// RunUntilIdle polls with e, committing each poll, until no task of a type
// registered with e is ready: it calls e.PollOnce until a call polls
// nothing. It returns how many polls ran.
//
// A workflow thus runs in the test's goroutine until it ends or waits: for a
// message from outside, for a child of a type e does not poll, or for a
// Sleep to pass (a task that sleeps is not ready until its time comes).
// Nothing runs in the background, so the test may look at the database as
// soon as it returns, and call it again after sending a message.
//
// A failed poll stops it: the error is PollOnce's, which names the task and
// its poller's error, and the count includes the polls of that last call.
// The failure is recorded as the executor would (the task retries after a
// backoff, or ends as failed past its MaxFailures); call RunUntilIdle again
// to go on. Past its limit of polls (see MaxPolls) it stops with an error
// that wraps ErrNotIdle.
func RunUntilIdle(ctx context.Context, e *executor.Executor, opts ...RunOption) (int, error) {
	o := runOptions{maxPolls: DefaultMaxPolls}
	for _, opt := range opts {
		opt(&o)
	}
	total := 0
	for {
		n, err := e.PollOnce(ctx)
		total += n
		if err != nil {
			return total, err
		}
		if n == 0 {
			return total, nil
		}
		if total > o.maxPolls {
			return total, fmt.Errorf("%w after %d polls, more than MaxPolls(%d): does a task yield, sleep 0 or send to itself for ever?", ErrNotIdle, total, o.maxPolls)
		}
	}
}
