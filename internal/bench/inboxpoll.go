package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/tasks"
)

const inboxPollType tasks.Type = "bench.inboxpoll"

// inboxPollWarmup is how many polls each level makes before the timed ones.
const inboxPollWarmup = 3

// runInboxPoll: the cost of one poll (executor.PollOnce: claim, poll,
// commit) of a task with Levels messages waiting, whose poller pops every
// message it is shown and suspends. Before each poll, untimed, the task is
// topped back up to the level with as many messages as the last poll
// popped, which also wakes it.
func runInboxPoll(ctx context.Context, r *runner, res *Result) error {
	o := r.opts
	levels := slices.Compact(slices.Sorted(slices.Values(o.Levels)))
	if len(levels) == 0 || levels[0] < 1 {
		return errors.New("inboxpoll: every level must be at least 1 message (a poll with none to pop would leave the task suspended)")
	}
	res.param("levels", levels)
	res.param("iterations", o.Iterations)
	db, err := r.pool(ctx, 4)
	if err != nil {
		return err
	}
	defer db.Close()
	fill := r.newFiller(db)
	var popped int // by the last poll
	ex, err := executor.New(db, r.executorConfig(1))
	if err != nil {
		return err
	}
	executor.Register(ex, inboxPollType, executor.PollerFunc[struct{}, note](
		func(ctx context.Context, t *executor.Task[struct{}, note]) (executor.Action, error) {
			popped = 0
			for {
				if _, ok := t.Inbox.Pop(); !ok {
					break
				}
				popped++
			}
			return executor.Suspend(), nil
		}), r.typeOptions()...)
	means := map[int]float64{}
	for _, level := range levels {
		// Asleep until the first fill wakes it.
		id, err := tasks.Create(ctx, db, tasks.Spec{Type: inboxPollType, WakeAt: time.Now().Add(time.Hour)})
		if err != nil {
			return err
		}
		start := time.Now()
		if err := fill.fill(ctx, id, level); err != nil {
			return err
		}
		prefill := time.Since(start)
		ds := make([]time.Duration, 0, o.Iterations)
		var total int
		for i := range inboxPollWarmup + o.Iterations {
			if i > 0 {
				if popped == 0 {
					return fmt.Errorf("level %d: poll %d popped no message", level, i)
				}
				if err := fill.fill(ctx, id, popped); err != nil {
					return err
				}
			}
			t0 := time.Now()
			n, err := ex.PollOnce(ctx)
			d := time.Since(t0)
			if err != nil {
				return fmt.Errorf("level %d: poll %d: %w", level, i, err)
			}
			if n != 1 {
				return fmt.Errorf("level %d: PollOnce %d polled %d tasks, want the one task", level, i, n)
			}
			if i >= inboxPollWarmup {
				ds = append(ds, d)
				total += popped
			}
		}
		m, p50, p99 := res.levelTimings(level, ds)
		means[level] = m
		perPoll := float64(total) / float64(max(len(ds), 1))
		r.progress("%d messages waiting: poll mean %.3f ms, p50 %.3f ms, p99 %.3f ms, %.0f popped per poll (prefill %.1fs)",
			level, m, p50, p99, perPoll, prefill.Seconds())
		label := fmt.Sprint(level)
		res.metric("popped_per_poll_"+label, perPoll)
		res.metric("prefill_sec_"+label, prefill.Seconds())
	}
	res.levelRatio("poll_ratio", levels, means)
	res.note("*_ms_LEVEL: one executor.PollOnce (claim, poll, commit) of a task with LEVEL messages waiting, whose poller pops every message it is shown and suspends; %d timed after %d untimed; poll_ratio = mean at the highest level / mean at the lowest", o.Iterations, inboxPollWarmup)
	res.note("before each poll, untimed, a filler task's poll sends as many messages as the last poll popped (Task.Send, one commit), which tops the backlog back up to LEVEL and wakes the task; popped_per_poll is how many messages a poll is shown")
	return nil
}
