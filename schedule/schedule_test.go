package schedule_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/corotasktest"
	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/schedule"
	"github.com/corotask/corotask/tasks"
)

const m = time.Minute

func TestEachSlotCreatesOneTask(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	id := v.ensure(t, spec("reports"))
	v.run(t)
	require.Empty(t, v.children(t, id))
	in := v.info(t, "reports")
	require.True(t, start.Add(9*m+30*time.Second).Equal(in.Next), "next %s", in.Next)
	require.True(t, in.LastRun.IsZero())

	v.advance(t, 9*m+30*time.Second) // 00:10, the slot itself
	require.Equal(t, keys("reports", 10*m), v.children(t, id))
	v.run(t)
	v.advance(t, 5*m)
	require.Equal(t, keys("reports", 10*m), v.children(t, id))
	v.advance(t, 5*m) // 00:20
	require.Equal(t, keys("reports", 10*m, 20*m), v.children(t, id))

	in = v.info(t, "reports")
	require.Equal(t, 2, in.Runs)
	require.True(t, start.Add(19*m+30*time.Second).Equal(in.LastRun))
	require.True(t, start.Add(29*m+30*time.Second).Equal(in.Next))
	children, err := tasks.List(v.ctx, v.db, tasks.Filter{Parent: id, Key: schedule.SlotKey("reports", start.Add(19*m+30*time.Second))})
	require.NoError(t, err)
	require.Len(t, children, 1)
	require.Equal(t, children[0].ID, in.LastTask)
}

func TestMissedSlotsAfterAGap(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		missed    schedule.Missed
		maxMissed int
		want      []time.Duration
	}{
		{schedule.MissedSkip, 0, nil},
		{"", 0, []time.Duration{60 * m}}, // once, the default
		{schedule.MissedAll, 3, []time.Duration{40 * m, 50 * m, 60 * m}},
		{schedule.MissedAll, 0, []time.Duration{10 * m, 20 * m, 30 * m, 40 * m, 50 * m, 60 * m}},
	} {
		t.Run(fmt.Sprintf("%s/%d", cmp.Or(tc.missed, "default"), tc.maxMissed), func(t *testing.T) {
			t.Parallel()
			v := newEnv(t)
			s := spec("gap")
			s.Missed, s.MaxMissed = tc.missed, tc.maxMissed
			id := v.ensure(t, s)
			v.run(t)
			v.advance(t, time.Hour) // 01:00:30: six slots due
			require.Equal(t, keys("gap", tc.want...), v.children(t, id))
			in := v.info(t, "gap")
			require.Equal(t, len(tc.want), in.Runs)
			require.Equal(t, 6-len(tc.want), in.Skipped)
			v.advance(t, 10*m) // 01:10, on time: runs whatever the policy
			require.Equal(t, keys("gap", append(tc.want, 70*m)...), v.children(t, id))
		})
	}
}

func TestPauseAndResume(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	id := v.ensure(t, spec("p"))
	v.run(t)
	require.NoError(t, schedule.Pause(v.ctx, v.db, "p"))
	v.run(t)
	in := v.info(t, "p")
	require.True(t, in.Paused)
	require.True(t, in.Next.IsZero())
	task, err := tasks.Get(v.ctx, v.db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusSuspended, task.Status)

	v.advance(t, 30*m) // 00:30:30
	require.Empty(t, v.children(t, id))
	// Ensure, unchanged, leaves it paused.
	v.ensure(t, spec("p"))
	v.run(t)
	require.True(t, v.info(t, "p").Paused)

	require.NoError(t, schedule.Resume(v.ctx, v.db, "p"))
	v.run(t)
	require.Empty(t, v.children(t, id), "the slots of the pause are not run")
	in = v.info(t, "p")
	require.False(t, in.Paused)
	require.True(t, start.Add(39*m+30*time.Second).Equal(in.Next))
	v.advance(t, 10*m)
	require.Equal(t, keys("p", 40*m), v.children(t, id))
}

func TestNoOverlap(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	s := spec("solo")
	s.NoOverlap, s.Missed = true, schedule.MissedAll
	id := v.ensure(t, s)
	v.run(t)
	v.advance(t, 9*m+30*time.Second) // 00:10
	require.Equal(t, keys("solo", 10*m), v.children(t, id))

	v.advance(t, 10*m) // 00:20: the task of 00:10 lives
	require.Equal(t, keys("solo", 10*m), v.children(t, id))
	require.Equal(t, 1, v.info(t, "solo").Skipped)

	// The task of 00:10 ends: the schedule hears of it, and runs the next slot.
	require.NoError(t, tasks.Cancel(v.ctx, v.db, v.info(t, "solo").LastTask))
	v.run(t)
	require.Equal(t, keys("solo", 10*m), v.children(t, id), "a skipped slot is not run late")
	v.advance(t, 10*m) // 00:30
	require.Equal(t, keys("solo", 10*m, 30*m), v.children(t, id))

	// A catch-up runs only the latest slot.
	require.NoError(t, tasks.Cancel(v.ctx, v.db, v.info(t, "solo").LastTask))
	v.advance(t, 30*m) // 01:00: 00:40, 00:50, 01:00 due
	require.Equal(t, keys("solo", 10*m, 30*m, 60*m), v.children(t, id))
	require.Equal(t, 3, v.info(t, "solo").Skipped)
}

// Two executors polling alternately, and at once, create each slot's task
// once.
func TestTwoExecutorsCreateEachSlotOnce(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	e2 := newExecutor(t, v.db)
	id := v.ensure(t, spec("two"))
	v.run(t)
	var want []time.Duration
	for i := 1; i <= 6; i++ {
		v.clock.Set(start.Add(time.Duration(i)*10*m - 30*time.Second))
		want = append(want, time.Duration(i)*10*m)
		switch i % 3 {
		case 0:
			_, err := v.e.PollOnce(v.ctx)
			require.NoError(t, err)
			_, err = e2.PollOnce(v.ctx)
			require.NoError(t, err)
		case 1:
			_, err := e2.PollOnce(v.ctx)
			require.NoError(t, err)
			_, err = v.e.PollOnce(v.ctx)
			require.NoError(t, err)
		case 2:
			var wg sync.WaitGroup
			for _, e := range []*executor.Executor{v.e, e2} {
				wg.Go(func() {
					_, err := e.PollOnce(v.ctx)
					require.NoError(t, err)
				})
			}
			wg.Wait()
		}
		require.Equal(t, keys("two", want...), v.children(t, id))
	}
}

// stallHooks holds the first poll of a schedule until released.
type stallHooks struct {
	executor.NoHooks
	once              sync.Once
	started, released chan struct{}
}

func (h *stallHooks) PollStart(ctx context.Context, info *executor.PollInfo) context.Context {
	if info.Type == schedule.Type {
		h.once.Do(func() {
			close(h.started)
			<-h.released
		})
	}
	return ctx
}

// An executor that stalls between its claim and its commit (as one that
// crashed) has its task taken over, and its late commit writes nothing.
func TestStalledPollCommitsNothing(t *testing.T) {
	t.Parallel()
	hooks := &stallHooks{started: make(chan struct{}), released: make(chan struct{})}
	v := newEnv(t, hooks)
	e2 := newExecutor(t, v.db)
	id := v.ensure(t, spec("stall"))
	_, err := corotasktest.RunUntilIdle(v.ctx, e2)
	require.NoError(t, err)

	v.clock.Advance(9*m + 30*time.Second) // 00:10
	done := make(chan error, 1)
	go func() {
		_, err := v.e.PollOnce(v.ctx)
		done <- err
	}()
	<-hooks.started
	v.clock.Advance(time.Minute) // past the stalled claim's expiry (30s)
	_, err = corotasktest.RunUntilIdle(v.ctx, e2)
	require.NoError(t, err)
	require.Equal(t, keys("stall", 10*m), v.children(t, id))

	close(hooks.released)
	<-done // its commit is fenced out, whatever it returns
	require.Equal(t, keys("stall", 10*m), v.children(t, id))
	require.Equal(t, 1, v.info(t, "stall").Runs)
}

// A poll whose commit fails (the slot's key is taken) spawns nothing and
// records nothing; the next one runs the slot.
func TestFailedCommitRunsTheSlotLater(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	id := v.ensure(t, spec("f"))
	v.run(t)
	slot := start.Add(9*m + 30*time.Second)
	blocker, err := tasks.Create(v.ctx, v.db, tasks.Spec{Type: "job.run", Key: schedule.SlotKey("f", slot)})
	require.NoError(t, err)
	v.clock.Set(slot)
	_, err = corotasktest.RunUntilIdle(v.ctx, v.e)
	require.ErrorIs(t, err, tasks.ErrExists)
	require.Empty(t, v.children(t, id))
	in := v.info(t, "f")
	require.Zero(t, in.Runs)
	require.True(t, in.LastRun.IsZero())

	require.NoError(t, tasks.Cancel(v.ctx, v.db, blocker))
	v.advance(t, 2*time.Second) // past the backoff
	require.Equal(t, keys("f", 10*m), v.children(t, id))
	require.Equal(t, 1, v.info(t, "f").Runs)
}

func TestEnsureIsIdempotentAndConcurrent(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	ids := make([]tasks.ID, 8)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			id, err := schedule.Ensure(v.ctx, v.db, spec("many"))
			require.NoError(t, err)
			ids[i] = id
		})
	}
	wg.Wait()
	for _, id := range ids {
		require.Equal(t, ids[0], id)
	}
	v.run(t)
	all, err := schedule.List(v.ctx, v.db)
	require.NoError(t, err)
	require.Len(t, all, 1)
	require.Equal(t, ids[0], all[0].Task)
	require.Equal(t, schedule.MissedOnce, all[0].Spec.Missed, "defaults filled in")
	require.Equal(t, schedule.DefaultMaxMissed, all[0].Spec.MaxMissed)

	// A changed spec is an update of the same schedule.
	s := spec("many")
	s.Cron, s.TimeZone = "0 9 * * *", "Europe/Paris"
	require.Equal(t, ids[0], v.ensure(t, s))
	v.run(t)
	in := v.info(t, "many")
	require.Equal(t, "0 9 * * *", in.Spec.Cron)
	require.True(t, time.Date(2030, 1, 1, 8, 0, 0, 0, time.UTC).Equal(in.Next), "next %s", in.Next)
	v.advance(t, 8*time.Hour)
	require.Equal(t, []string{"many@2030-01-01T09:00:00+01:00"}, v.children(t, ids[0]))
}

func TestDeleteAndBackfill(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	id := v.ensure(t, spec("b"))
	v.run(t)
	v.clock.Set(start.Add(time.Hour)) // 01:00:30; the schedule runs 01:00
	v.run(t)
	require.Equal(t, keys("b", 60*m), v.children(t, id))

	day := start.Truncate(24 * time.Hour)
	require.NoError(t, schedule.Backfill(v.ctx, v.db, "b", day.Add(20*m), day.Add(2*time.Hour)))
	v.run(t)
	// 00:20 to 00:50 run; 01:00 lives already; 01:10 on are not due.
	require.Equal(t, keys("b", 20*m, 30*m, 40*m, 50*m, 60*m), v.children(t, id))

	require.ErrorContains(t, schedule.Backfill(v.ctx, v.db, "b", day.Add(2*time.Hour), day), "runs backwards")
	require.ErrorContains(t, schedule.Backfill(v.ctx, v.db, "b", day.Add(time.Minute), day.Add(2*time.Minute)), "no slot")
	require.ErrorContains(t, schedule.Backfill(v.ctx, v.db, "b", day, day.Add(365*24*time.Hour)), "at most 1000 at once")

	require.NoError(t, schedule.Delete(v.ctx, v.db, "b"))
	v.run(t)
	all, err := schedule.List(v.ctx, v.db)
	require.NoError(t, err)
	require.Empty(t, all)
	require.ErrorIs(t, schedule.Pause(v.ctx, v.db, "b"), schedule.ErrNotFound)
	require.NotEqual(t, id, v.ensure(t, spec("b")), "the name is free again")
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	for want, change := range map[string]func(*schedule.Spec){
		"invalid schedule name: empty":      func(s *schedule.Spec) { s.Name = "" },
		`invalid schedule name "a b"`:       func(s *schedule.Spec) { s.Name = "a b" },
		"bytes, at most 128":                func(s *schedule.Spec) { s.Name = string(make([]byte, 129)) },
		`schedule "x": type`:                func(s *schedule.Spec) { s.Type = "" },
		"state is not valid JSON":           func(s *schedule.Spec) { s.State = []byte("{") },
		`minute field "61"`:                 func(s *schedule.Spec) { s.Cron = "61 * * * *" },
		`invalid time zone "Nowhere/Land"`:  func(s *schedule.Spec) { s.TimeZone = "Nowhere/Land" },
		`invalid missed-run policy "twice"`: func(s *schedule.Spec) { s.Missed = "twice" },
		"max missed 5000 is out of range":   func(s *schedule.Spec) { s.MaxMissed = 5000 },
	} {
		s := spec("x")
		s.Name = "x"
		change(&s)
		_, err := schedule.Ensure(v.ctx, v.db, s)
		require.ErrorContains(t, err, want)
	}
	// A type no executor serves is allowed.
	s := spec("unserved")
	s.Type = "nobody.serves"
	_, err := schedule.Ensure(v.ctx, v.db, s)
	require.NoError(t, err)

	for _, op := range []func(context.Context, tasks.DB, string) error{schedule.Pause, schedule.Resume, schedule.Delete} {
		require.ErrorIs(t, op(v.ctx, v.db, "absent"), schedule.ErrNotFound)
		require.ErrorIs(t, op(v.ctx, v.db, "absent"), tasks.ErrNotFound)
		require.ErrorContains(t, op(v.ctx, v.db, ""), "invalid schedule name")
	}
	err = schedule.Backfill(v.ctx, v.db, "absent", start, start.Add(time.Hour))
	require.True(t, errors.Is(err, schedule.ErrNotFound), "%v", err)
}

// An update sent by other means than Ensure is checked, and dropped when
// invalid.
func TestInvalidUpdateIsDropped(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	id := v.ensure(t, spec("u"))
	v.run(t)
	require.NoError(t, inbox.Send(v.ctx, v.db, id, tasks.ID{}, map[string]any{
		"op": "update", "spec": map[string]any{"name": "u", "type": "job.run", "cron": "99 * * * *"}}))
	require.NoError(t, inbox.Send(v.ctx, v.db, id, tasks.ID{}, map[string]any{
		"op": "update", "spec": map[string]any{"name": "other", "type": "job.run", "cron": "@daily"}}))
	require.NoError(t, inbox.Send(v.ctx, v.db, id, tasks.ID{}, "not a schedule's message"))
	v.run(t)
	require.Equal(t, "*/10 * * * *", v.info(t, "u").Spec.Cron)
	v.advance(t, 9*m+30*time.Second)
	require.Equal(t, keys("u", 10*m), v.children(t, id))
}

// Across Paris's changes of time in 2030 (31 March, 27 October), a daily
// 02:30 slot is skipped on the night it does not exist and runs once on the
// night it occurs twice.
func TestDaylightSavingTime(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	s := spec("dst")
	s.Cron, s.TimeZone, s.Missed = "30 2 * * *", "Europe/Paris", schedule.MissedAll
	for _, tc := range []struct {
		from string
		want []string
	}{
		{"2030-03-29T12:00:00Z", []string{"dst@2030-03-30T02:30:00+01:00", "dst@2030-04-01T02:30:00+02:00"}},
		{"2030-10-25T12:00:00Z", []string{"dst@2030-10-26T02:30:00+02:00", "dst@2030-10-27T02:30:00+02:00", "dst@2030-10-28T02:30:00+01:00"}},
	} {
		from, err := time.Parse(time.RFC3339, tc.from)
		require.NoError(t, err)
		v.clock.Set(from)
		if tc.from == "2030-03-29T12:00:00Z" {
			v.ensure(t, s)
		}
		v.run(t)
		id := v.info(t, "dst").Task
		before, skipped := v.children(t, id), v.info(t, "dst").Skipped // the catch-up of the months between
		for range 3 * 24 * 4 {                                         // three days, by quarters of an hour
			v.advance(t, 15*m)
		}
		require.Equal(t, tc.want, v.children(t, id)[len(before):])
		require.Equal(t, skipped, v.info(t, "dst").Skipped)
	}
}

// A backfill that names the slot due now, twice, creates each slot's task
// once: the executors were down past a slot, and an operator backfilled the
// outage before they came back.
func TestBackfillOfADueSlot(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	id := v.ensure(t, spec("d"))
	v.run(t)
	v.clock.Set(start.Add(40 * time.Minute)) // 00:40:30, nothing polled since 00:00:30
	day := start.Truncate(24 * time.Hour)
	for range 2 {
		require.NoError(t, schedule.Backfill(v.ctx, v.db, "d", day.Add(10*m), day.Add(40*m)))
	}
	v.run(t)
	require.Equal(t, keys("d", 10*m, 20*m, 30*m, 40*m), v.children(t, id))
	require.Equal(t, 4, v.info(t, "d").Runs)
	v.advance(t, 10*time.Minute)
	require.Equal(t, keys("d", 10*m, 20*m, 30*m, 40*m, 50*m), v.children(t, id))
}

// Ensure right after Delete, before the schedule's poll reads either,
// brings the schedule back, afresh.
func TestEnsureAfterDelete(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	id := v.ensure(t, spec("e"))
	v.run(t)
	require.NoError(t, schedule.Delete(v.ctx, v.db, "e"))
	require.Equal(t, id, v.ensure(t, spec("e")), "the schedule task lives until its poll")
	v.run(t)
	in := v.info(t, "e")
	require.False(t, in.Paused)
	v.advance(t, 10*time.Minute)
	require.Equal(t, keys("e", 10*m), v.children(t, id))
}
