package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/tasks"
)

// Register registers the poller of schedules (tasks of type Type) on e, and
// returns its handle. Run it on the executors that should run schedules;
// the tasks a schedule creates are polled by whichever executors serve
// their type.
//
// It panics, as executor.Register does, when e already serves Type.
func Register(e *executor.Executor, opts ...executor.Option) {
	executor.Register(e, Type, executor.Poller[state, json.RawMessage](&poller{pool: e.Pool()}), opts...)
}

type poller struct {
	pool *pgxpool.Pool
}

func (p *poller) Poll(ctx context.Context, t *executor.Task[state, json.RawMessage]) (executor.Action, error) {
	now := t.Now() // the database's clock, which SleepUntil goes by
	st := &t.State
	var backfills []message
	deleted := false
	for {
		m, ok := t.Inbox.Pop()
		if !ok {
			break
		}
		if m.Done {
			if m.From == st.LastTask {
				st.LastTaskLive = false
			}
			continue
		}
		var msg message
		if err := json.Unmarshal(m.Body, &msg); err != nil {
			slog.WarnContext(ctx, "schedule: dropping a message that is not a schedule's", "schedule", st.Spec.Name, "error", err)
			continue
		}
		switch msg.Op {
		case opUpdate:
			if msg.Spec == nil || (!deleted && sameSpec(*msg.Spec, st.Spec)) {
				continue
			}
			// Ensure sends only valid specs; one sent by other means (corotask
			// send, SQL) is checked too, and dropped rather than break the
			// schedule.
			spec, err := msg.Spec.normalize()
			if err == nil && spec.Name != st.Spec.Name {
				err = fmt.Errorf("the name %q is not the schedule's", spec.Name)
			}
			if err != nil {
				slog.WarnContext(ctx, "schedule: dropping an invalid update", "schedule", st.Spec.Name, "error", err)
				continue
			}
			msg.Spec = &spec
			if deleted {
				// An Ensure after a Delete, read in the same poll: the
				// schedule starts afresh, as a new one would.
				*st, deleted = state{}, false
			}
			if msg.Spec.Cron != st.Spec.Cron || msg.Spec.TimeZone != st.Spec.TimeZone {
				st.Next = time.Time{}
			}
			st.Spec = *msg.Spec
		case opPause:
			st.Paused = true
		case opResume:
			if st.Paused {
				st.Paused, st.Next = false, time.Time{}
			}
		case opDelete:
			// Ended once the inbox is read: an Ensure sent after it brings
			// the schedule back (above), and what came before it is moot.
			deleted, backfills = true, nil
		case opBackfill:
			backfills = append(backfills, msg)
		}
	}
	if deleted {
		return executor.Done(), nil
	}
	if st.Spec.MaxMissed < 1 { // a state set by hand
		st.Spec.MaxMissed = DefaultMaxMissed
	}
	cron, err := ParseCron(st.Spec.Cron, st.Spec.TimeZone)
	if err != nil { // the spec was checked when sent: a state set by hand
		return executor.Action{}, executor.Fail(fmt.Errorf("schedule %q: %w", st.Spec.Name, err))
	}
	// The slots this poll creates a task for: two backfills, or a backfill
	// and the due slot, that name one slot create one task.
	spawned := map[time.Time]tasks.ID{}
	for _, b := range backfills {
		slots, _, _ := slotsIn(cron, b.From.Add(-time.Nanosecond), minTime(b.To, now), MaxSlotsAtOnce)
		for _, s := range slots {
			if _, ok := spawned[s]; ok {
				continue
			}
			// A slot whose task still lives is not run again (its key is
			// taken: the commit would fail).
			_, err := tasks.GetByKey(ctx, p.pool, st.Spec.Type, SlotKey(st.Spec.Name, s))
			switch {
			case err == nil:
				st.Skipped++
			case errors.Is(err, tasks.ErrNotFound):
				spawned[s] = spawn(t, s)
				st.Runs++
			default:
				return executor.Action{}, fmt.Errorf("schedule %q: backfill: %w", st.Spec.Name, err)
			}
		}
	}
	if st.Paused {
		return executor.Suspend(), nil
	}
	if st.Next.IsZero() {
		st.Next = cron.Next(maxTime(now, st.LastSlot))
	}
	if !st.Next.IsZero() && !st.Next.After(now) {
		p.runDue(t, cron, now, spawned)
	}
	if st.Next.IsZero() {
		return executor.Suspend(), nil // a cron with no slot left
	}
	return executor.SleepUntil(st.Next), nil
}

// runDue spawns the tasks of the slots due by now, from st.Next on, as the
// missed-run policy and NoOverlap say (but for those spawned already, by a
// backfill of this poll), and moves st.Next past now.
func (p *poller) runDue(t *executor.Task[state, json.RawMessage], cron *Cron, now time.Time, spawned map[time.Time]tasks.ID) {
	st := &t.State
	keep := 1
	if st.Spec.Missed == MissedAll && !st.Spec.NoOverlap {
		keep = st.Spec.MaxMissed
	}
	slots, total, last := slotsIn(cron, st.Next.Add(-time.Nanosecond), now, keep)
	switch {
	case st.Spec.NoOverlap && st.LastTaskLive:
		slots = nil
	case st.Spec.Missed == MissedSkip && total > 1:
		slots = nil
	}
	for _, s := range slots {
		id, ok := spawned[s]
		if !ok {
			id = spawn(t, s)
			st.Runs++
		}
		st.LastTask, st.LastTaskLive = id, true
	}
	st.Skipped += total - len(slots)
	if total > 0 {
		st.LastSlot = last
	}
	st.Next = cron.Next(maxTime(now, st.LastSlot))
}

// spawn creates the task of slot s as a child of the schedule, keyed by
// the schedule's name and the slot.
func spawn(t *executor.Task[state, json.RawMessage], s time.Time) tasks.ID {
	var st any
	if len(t.State.Spec.State) > 0 {
		st = t.State.Spec.State
	}
	return t.SpawnKeyed(t.State.Spec.Type, SlotKey(t.State.Spec.Name, s), st, nil)
}

// SlotKey is the key of the task that schedule name creates for slot s.
func SlotKey(name string, s time.Time) string {
	return name + "@" + s.Format(time.RFC3339)
}

// slotsIn returns the latest keep slots in (after, until], how many there
// are in all, and the last one.
func slotsIn(cron *Cron, after, until time.Time, keep int) (kept []time.Time, total int, last time.Time) {
	ring := make([]time.Time, 0, min(keep, 64))
	for s := cron.Next(after); !s.IsZero() && !s.After(until); s = cron.Next(s) {
		if len(ring) < keep {
			ring = append(ring, s)
		} else {
			ring[total%keep] = s
		}
		total, last = total+1, s
	}
	if total <= keep {
		return ring, total, last
	}
	at := total % keep // the oldest kept
	return append(append(make([]time.Time, 0, keep), ring[at:]...), ring[:at]...), total, last
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
