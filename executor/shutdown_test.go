package executor_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

func TestShutdownReleasesClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	db := testdb.Pool(t, url)
	cfg := fastConfig(t)
	cfg.ShutdownTimeout = 100 * time.Millisecond
	// a's claims would last an hour (fastConfig): b polls the tasks only if
	// a gave them back.
	a := executor.MustNew(testdb.Pool(t, url), cfg)
	var entered sync.WaitGroup
	entered.Add(3)
	executor.Register(a, "job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		entered.Done()
		<-ctx.Done()
		return executor.Action{}, context.Cause(ctx)
	}))
	specs := []tasks.Spec{{Type: "job"}, {Type: "job"}, {Type: "job"}}
	ids, err := tasks.CreateMany(ctx, db, specs)
	require.NoError(t, err)
	stopA := start(t, a)
	entered.Wait()
	stopA()

	for _, id := range ids {
		task, err := tasks.Get(ctx, db, id)
		require.NoError(t, err)
		require.Equal(t, tasks.StatusUnserved, task.Status, "released, not left to go stale; its executor stopped")
		require.Zero(t, task.Failures, "a release is not a failure")
	}

	b := executor.MustNew(testdb.Pool(t, url), fastConfig(t))
	executor.Register(b, "job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.Done(), nil
	}))
	start(t, b)
	for _, id := range ids {
		waitStatus(t, db, id, tasks.StatusDone)
	}
}
