package schedule

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/tasks"
)

// Ensure creates the schedule spec names, or updates it to spec when it
// exists with another one, and returns its task's ID. It is idempotent and
// safe to call from many processes at once, at each start-up: processes
// racing on a name create one schedule, and an unchanged spec changes
// nothing (a paused schedule stays paused). A changed cron or time zone
// takes effect from the next slot after now.
//
// It fails with an error that names the field at fault for an invalid spec
// (name, type, state, cron, time zone, missed-run policy).
func Ensure(ctx context.Context, db tasks.DB, spec Spec) (tasks.ID, error) {
	spec, err := spec.normalize()
	if err != nil {
		return tasks.ID{}, err
	}
	id, err := inbox.SendToKey(ctx, db, Type, spec.Name, message{Op: opUpdate, Spec: &spec}, state{Spec: spec})
	if err != nil {
		return tasks.ID{}, fmt.Errorf("ensure schedule %q: %w", spec.Name, err)
	}
	return id, nil
}

// ErrNotFound: no live schedule has the name. It wraps tasks.ErrNotFound.
var ErrNotFound = fmt.Errorf("schedule %w", tasks.ErrNotFound)

// Pause pauses schedule name: it runs nothing until Resume.
func Pause(ctx context.Context, db tasks.DB, name string) error {
	return send(ctx, db, name, message{Op: opPause})
}

// Resume resumes schedule name from its next slot after now; the slots of
// the pause are not run.
func Resume(ctx context.Context, db tasks.DB, name string) error {
	return send(ctx, db, name, message{Op: opResume})
}

// Delete ends schedule name, once its task reads the message; the tasks it
// created live on.
func Delete(ctx context.Context, db tasks.DB, name string) error {
	return send(ctx, db, name, message{Op: opDelete})
}

// Backfill asks schedule name to run each of its slots from from to to
// (both included) that is due, now, whatever its missed-run policy,
// NoOverlap and pause say; a slot whose task still lives is not run again.
// It fails when the range is empty, backwards, or holds more than
// MaxSlotsAtOnce slots.
func Backfill(ctx context.Context, db tasks.DB, name string, from, to time.Time) error {
	if to.Before(from) {
		return fmt.Errorf("backfill schedule %q: the range runs backwards (%s to %s)", name, from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	t, err := get(ctx, db, name)
	if err != nil {
		return err
	}
	st, err := decodeState(t)
	if err != nil {
		return err
	}
	cron, err := ParseCron(st.Spec.Cron, st.Spec.TimeZone)
	if err != nil {
		return fmt.Errorf("backfill schedule %q: %w", name, err)
	}
	_, n, _ := slotsIn(cron, from.Add(-time.Nanosecond), to, 1)
	switch {
	case n == 0:
		return fmt.Errorf("backfill schedule %q: no slot from %s to %s", name, from.Format(time.RFC3339), to.Format(time.RFC3339))
	case n > MaxSlotsAtOnce:
		return fmt.Errorf("backfill schedule %q: %d slots from %s to %s, at most %d at once", name, n, from.Format(time.RFC3339), to.Format(time.RFC3339), MaxSlotsAtOnce)
	}
	return sendTo(ctx, db, name, t.ID, message{Op: opBackfill, From: from, To: to})
}

// send sends msg to the live schedule name.
func send(ctx context.Context, db tasks.DB, name string, msg message) error {
	t, err := get(ctx, db, name)
	if err != nil {
		return err
	}
	return sendTo(ctx, db, name, t.ID, msg)
}

func sendTo(ctx context.Context, db tasks.DB, name string, id tasks.ID, msg message) error {
	err := inbox.Send(ctx, db, id, tasks.ID{}, msg)
	if errors.Is(err, tasks.ErrEnded) { // deleted meanwhile
		return fmt.Errorf("%s %w: %q", msg.Op, ErrNotFound, name)
	}
	if err != nil {
		return fmt.Errorf("%s schedule %q: %w", msg.Op, name, err)
	}
	return nil
}

// get returns the live task of schedule name.
func get(ctx context.Context, db tasks.DB, name string) (*tasks.Task, error) {
	if err := validateName(name); err != nil {
		return nil, err
	}
	t, err := tasks.GetByKey(ctx, db, Type, name)
	if errors.Is(err, tasks.ErrNotFound) {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if err != nil {
		return nil, fmt.Errorf("schedule %q: %w", name, err)
	}
	return t, nil
}
