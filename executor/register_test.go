package executor_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/tasks"
)

func TestRegister(t *testing.T) {
	t.Parallel()
	e := executor.MustNew(&pgxpool.Pool{}, executor.Config{})
	p := executor.PollerFunc[int, int](func(context.Context, *executor.Task[int, int]) (executor.Action, error) {
		return executor.Done(), nil
	})
	h, err := executor.RegisterSafely(e, "a", p)
	require.NoError(t, err)
	require.Equal(t, tasks.Type("a"), h.Type())
	_, err = executor.RegisterSafely(e, "a", p)
	require.ErrorIs(t, err, executor.ErrDuplicateType)
	require.Panics(t, func() { executor.Register(e, "a", p) })
	_, err = executor.RegisterSafely(e, "", p)
	require.ErrorContains(t, err, "invalid task type")
}
