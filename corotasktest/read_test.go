package corotasktest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/corotasktest"
	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/tasks"
)

// fatalTB records what the helper under test would fail the test with,
// and stops it there.
type fatalTB struct {
	testing.TB
	msg string
}

type stopped struct{}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(stopped{})
}

// failure returns what fn failed the test with ("" if it did not).
func failure(t *testing.T, fn func(tb testing.TB)) (msg string) {
	f := &fatalTB{TB: t}
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(stopped); !ok {
				panic(v)
			}
			msg = f.msg
		}
	}()
	fn(f)
	return ""
}

func TestStateAndResult(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := corotasktest.Tx(t)
	id, err := tasks.Create(ctx, tx, tasks.Spec{Type: "test.task", State: map[string]any{"numbers": []int{4}, "total": 2}})
	require.NoError(t, err)
	require.Equal(t, sum{Numbers: []int{4}, Total: 2}, corotasktest.State[sum](t, tx, id))

	bare, err := tasks.Create(ctx, tx, tasks.Spec{Type: "test.task"})
	require.NoError(t, err)
	require.Zero(t, corotasktest.State[sum](t, tx, bare), "no state: the zero value")

	require.Equal(t, fmt.Sprintf("corotasktest: task %s (test.task): state {\"total\": 2, \"numbers\": [4]} does not decode into int: json: cannot unmarshal object into Go value of type int", id),
		failure(t, func(tb testing.TB) { corotasktest.State[int](tb, tx, id) }))
	require.Equal(t, fmt.Sprintf("corotasktest: task %s (test.task) is ready, not done", id),
		failure(t, func(tb testing.TB) { corotasktest.Result[int](tb, tx, id) }))
	missing := tasks.NewID()
	require.Contains(t, failure(t, func(tb testing.TB) { corotasktest.State[int](tb, tx, missing) }),
		fmt.Sprintf("corotasktest: read task %s: ", missing))
}

func TestResultOfEndedTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, db := newSumExecutor(t)
	done, err := sums.Create(ctx, db, sum{Numbers: []int{7}})
	require.NoError(t, err)
	empty, err := sums.Create(ctx, db, sum{})
	require.NoError(t, err)
	failed, err := items.Create(ctx, db, -1)
	require.NoError(t, err)
	_, err = corotasktest.RunUntilIdle(ctx, e)
	require.ErrorContains(t, err, "negative")
	_, err = corotasktest.RunUntilIdle(ctx, e) // past the failure
	require.NoError(t, err)

	require.Equal(t, 7, corotasktest.Result[int](t, db, done))
	require.Equal(t, json.RawMessage("0"), corotasktest.Result[json.RawMessage](t, db, empty))
	require.Equal(t, fmt.Sprintf("corotasktest: task %s (test.item) is failed, not done; last error: negative", failed),
		failure(t, func(tb testing.TB) { corotasktest.Result[int](tb, db, failed) }))

	// Done with no result: the zero value.
	e2 := executor.MustNew(db, executor.Config{Logger: corotasktest.Logger(t)})
	h := executor.Register(e2, "test.done", executor.PollerFunc[int, int](
		func(context.Context, *executor.Task[int, int]) (executor.Action, error) { return executor.Done(), nil }))
	id, err := h.Create(ctx, db, 0)
	require.NoError(t, err)
	_, err = corotasktest.RunUntilIdle(ctx, e2)
	require.NoError(t, err)
	require.Zero(t, corotasktest.Result[int](t, db, id))
}
