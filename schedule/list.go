package schedule

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/corotask/corotask/tasks"
)

// Info is a schedule as List returns it.
type Info struct {
	Spec   Spec
	Task   tasks.ID // the schedule's task
	Paused bool
	// Next is its next slot; zero when paused, or when it has none left.
	// For a schedule not yet polled, it is computed from this process's
	// clock.
	Next time.Time
	// LastRun is the latest slot it dealt with (zero: none yet), and
	// LastTask the task of the latest slot it ran.
	LastRun  time.Time
	LastTask tasks.ID
	// Runs counts the tasks it created, Skipped the slots it did not run.
	Runs, Skipped int
}

// List returns the live schedules, oldest first.
func List(ctx context.Context, db tasks.DB) ([]Info, error) {
	var out []Info
	f := tasks.Filter{Type: Type, Limit: 500}
	for {
		page, err := tasks.List(ctx, db, f)
		if err != nil {
			return nil, fmt.Errorf("list schedules: %w", err)
		}
		for _, t := range page {
			if t.Status.Ended() {
				continue
			}
			st, err := decodeState(t)
			if err != nil {
				return nil, err
			}
			out = append(out, info(t.ID, st))
		}
		if len(page) < f.Limit {
			return out, nil
		}
		f.After = page[len(page)-1].ID
	}
}

func info(id tasks.ID, st state) Info {
	in := Info{Spec: st.Spec, Task: id, Paused: st.Paused, Next: st.Next, LastRun: st.LastSlot,
		LastTask: st.LastTask, Runs: st.Runs, Skipped: st.Skipped}
	switch {
	case st.Paused:
		in.Next = time.Time{}
	case in.Next.IsZero():
		if c, err := ParseCron(st.Spec.Cron, st.Spec.TimeZone); err == nil {
			in.Next = c.Next(maxTime(time.Now(), st.LastSlot))
		}
	}
	return in
}

func decodeState(t *tasks.Task) (state, error) {
	var st state
	if err := json.Unmarshal(t.State, &st); err != nil {
		return st, fmt.Errorf("schedule task %s: state: %w", t.ID, err)
	}
	return st, nil
}
