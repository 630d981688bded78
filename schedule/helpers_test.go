package schedule_test

import (
	"context"
	"encoding/json"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/corotasktest"
	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/schedule"
	"github.com/corotask/corotask/tasks"
)

// start is when the tests' clocks start: 30s past a slot of "*/10 * * * *".
var start = time.Date(2030, 1, 1, 0, 0, 30, 0, time.UTC)

// env is a database on a test clock set to start, and an executor that
// runs schedules (but not the tasks they create, of type "job.run").
type env struct {
	ctx   context.Context
	clock *corotasktest.Clock
	db    *pgxpool.Pool
	e     *executor.Executor
}

func newEnv(t *testing.T, hooks ...executor.Hooks) *env {
	t.Helper()
	clock := corotasktest.NewClock()
	clock.Set(start)
	db := corotasktest.NewDB(t, corotasktest.WithClock(clock))
	return &env{ctx: context.Background(), clock: clock, db: db, e: newExecutor(t, db, hooks...)}
}

func newExecutor(t *testing.T, db *pgxpool.Pool, hooks ...executor.Hooks) *executor.Executor {
	cfg := executor.Config{Logger: corotasktest.Logger(t)}
	if len(hooks) > 0 {
		cfg.Hooks = hooks[0]
	}
	e := executor.MustNew(db, cfg)
	schedule.Register(e, executor.Backoff(time.Second, time.Second))
	return e
}

// spec is a schedule every ten minutes of tasks of type job.run.
func spec(name string) schedule.Spec {
	return schedule.Spec{Name: name, Type: "job.run", State: json.RawMessage(`{"report": "daily"}`), Cron: "*/10 * * * *"}
}

func (v *env) ensure(t *testing.T, s schedule.Spec) tasks.ID {
	t.Helper()
	id, err := schedule.Ensure(v.ctx, v.db, s)
	require.NoError(t, err)
	return id
}

// run polls until idle, which must not fail.
func (v *env) run(t *testing.T) {
	t.Helper()
	_, err := corotasktest.RunUntilIdle(v.ctx, v.e)
	require.NoError(t, err)
}

// advance moves the clock by d and polls until idle.
func (v *env) advance(t *testing.T, d time.Duration) {
	t.Helper()
	v.clock.Advance(d)
	v.run(t)
}

// children returns the keys of the tasks schedule id created, sorted.
func (v *env) children(t *testing.T, id tasks.ID) []string {
	t.Helper()
	list, err := tasks.List(v.ctx, v.db, tasks.Filter{Parent: id, Limit: 1000})
	require.NoError(t, err)
	keys := make([]string, len(list))
	for i, c := range list {
		require.Equal(t, tasks.Type("job.run"), c.Type)
		require.JSONEq(t, `{"report": "daily"}`, string(c.State))
		keys[i] = c.Key
	}
	sort.Strings(keys)
	return keys
}

// info returns schedule name as List shows it.
func (v *env) info(t *testing.T, name string) schedule.Info {
	t.Helper()
	all, err := schedule.List(v.ctx, v.db)
	require.NoError(t, err)
	for _, in := range all {
		if in.Spec.Name == name {
			return in
		}
	}
	t.Fatalf("schedule %q is not listed", name)
	return schedule.Info{}
}

// keys returns the keys of schedule name's tasks at the given times past
// midnight of the start's day.
func keys(name string, at ...time.Duration) []string {
	out := make([]string, len(at))
	day := start.Truncate(24 * time.Hour)
	for i, d := range at {
		out[i] = schedule.SlotKey(name, day.Add(d))
	}
	sort.Strings(out)
	return out
}
