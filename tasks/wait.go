package tasks

import (
	"context"
	"fmt"
	"time"
)

// Wait returns the task once it has ended (done, failed or canceled), or an
// error when ctx ends first or the task does not exist. It reads the task
// every few milliseconds at first, then less often (up to every
// half second), so it suits a program that submits a task and wants its
// result; it works through any pooler, with no LISTEN.
func Wait(ctx context.Context, db DB, id ID) (*Task, error) {
	delay := 5 * time.Millisecond
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for task %s: %w", id, context.Cause(ctx))
		case <-t.C:
		}
		task, err := Get(ctx, db, id)
		if err != nil {
			return nil, err
		}
		if task.Status.Ended() {
			return task, nil
		}
		t.Reset(delay)
		delay = min(delay*2, 500*time.Millisecond)
	}
}
