package executor_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

type keyedChild struct{ N int }

var keyedChildren = executor.NewHandle[keyedChild, string]("keyed.child")

// A poll spawns children with keys; a key that a live task holds, or that
// another child of the same poll takes, fails the poll with ErrExists,
// naming the task that holds it, and creates nothing.
func TestSpawnKeyed(t *testing.T) {
	t.Parallel()
	checkSpawnKeyed(t, testdb.New(t))
}

// checkSpawnKeyed runs TestSpawnKeyed's polls on db.
func checkSpawnKeyed(t *testing.T, db *pgxpool.Pool) {
	ctx := context.Background()
	e := executor.MustNew(db, fastConfig(t))
	var children []tasks.ID
	executor.Register(e, "keyed.parent", executor.PollerFunc[[]string, string](func(ctx context.Context, t *executor.Task[[]string, string]) (executor.Action, error) {
		children = children[:0]
		for _, key := range t.State {
			msg := "hello " + key
			children = append(children, keyedChildren.SpawnKeyed(t, key, keyedChild{N: len(children)}, &msg))
		}
		return executor.Suspend(), nil
	}))

	parent, err := tasks.Create(ctx, db, tasks.Spec{Type: "keyed.parent", State: []string{"a", "b"}})
	require.NoError(t, err)
	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	a, b := children[0], children[1]
	child, err := tasks.GetByKey(ctx, db, keyedChildren.Type(), "a")
	require.NoError(t, err)
	require.Equal(t, a, child.ID)
	require.Equal(t, parent, child.Parent)
	require.Equal(t, "a", child.Key)
	require.JSONEq(t, `{"N":0}`, string(child.State))
	require.Len(t, child.Inbox, 1)
	child, err = tasks.GetByKey(ctx, db, keyedChildren.Type(), "b")
	require.NoError(t, err)
	require.Equal(t, b, child.ID)

	for _, c := range []struct {
		name   string
		keys   []string
		holder func() tasks.ID
	}{
		{"held by a live task", []string{"c", "a"}, func() tasks.ID { return a }},
		{"twice in one poll", []string{"d", "d"}, func() tasks.ID { return children[0] }},
	} {
		again, err := tasks.Create(ctx, db, tasks.Spec{Type: "keyed.parent", State: c.keys})
		require.NoError(t, err, c.name)
		n, err := e.PollOnce(ctx)
		require.Equal(t, 1, n, c.name)
		require.ErrorIs(t, err, tasks.ErrExists, c.name)
		require.ErrorContains(t, err, c.holder().String(), c.name)
		task, err := tasks.Get(ctx, db, again)
		require.NoError(t, err)
		require.Equal(t, 1, task.Failures, c.name)
		require.Contains(t, task.LastError, c.holder().String(), c.name)
		require.Contains(t, task.LastError, "task already exists", c.name)
		list, err := tasks.List(ctx, db, tasks.Filter{Parent: again})
		require.NoError(t, err)
		require.Empty(t, list, "%s: the failed poll created no child", c.name)
		require.NoError(t, tasks.Cancel(ctx, db, again))
	}

	// An empty or invalid key fails the poll before its commit.
	for key, want := range map[string]string{"": "invalid task key: empty", "x\ny": "control character U+000A"} {
		_, err := tasks.Create(ctx, db, tasks.Spec{Type: "keyed.parent", State: []string{key}})
		require.NoError(t, err)
		_, err = e.PollOnce(ctx)
		require.ErrorContains(t, err, want)
	}
}

func TestHandleKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	id, err := keyedChildren.CreateKeyed(ctx, db, "k1", keyedChild{N: 1})
	require.NoError(t, err)
	_, err = keyedChildren.CreateKeyed(ctx, db, "k1", keyedChild{N: 2})
	var exists *tasks.ExistsError
	require.ErrorAs(t, err, &exists)
	require.Equal(t, id, exists.ID)
	_, err = keyedChildren.CreateKeyed(ctx, db, "", keyedChild{})
	require.ErrorContains(t, err, "invalid task key: empty")

	sent, err := keyedChildren.SendToKey(ctx, db, "k1", "hi", keyedChild{N: 9})
	require.NoError(t, err)
	require.Equal(t, id, sent)
	created, err := keyedChildren.SendToKey(ctx, db, "k2", "hi", keyedChild{N: 9})
	require.NoError(t, err)
	task, err := tasks.Get(ctx, db, created)
	require.NoError(t, err)
	require.Equal(t, "k2", task.Key)
	require.JSONEq(t, `{"N":9}`, string(task.State))
	require.Equal(t, 1, task.InboxLen)
}

// Under Run, whose committer batches polls, many parents spawn children
// with the same keys at once: each key is created once, and the polls
// whose keys were taken fail (and are retried) rather than commit.
func TestSpawnKeyedRacesUnderRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	cfg := fastConfig(t)
	cfg.BackoffMin, cfg.BackoffMax = time.Hour, time.Hour
	e := executor.MustNew(db, cfg)
	executor.Register(e, "keyed.parent", executor.PollerFunc[string, string](func(ctx context.Context, t *executor.Task[string, string]) (executor.Action, error) {
		keyedChildren.SpawnKeyed(t, t.State, keyedChild{}, nil)
		return executor.Suspend(), nil
	}))
	const parents = 20
	specs := make([]tasks.Spec, parents)
	for i := range specs {
		specs[i] = tasks.Spec{Type: "keyed.parent", State: fmt.Sprintf("k%d", i%4)}
	}
	ids, err := tasks.CreateMany(ctx, db, specs)
	require.NoError(t, err)
	start(t, e)
	waitFor(t, "every parent polled", func() bool {
		var polled int
		require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM corotask.tasks
			WHERE task_id = ANY ($1) AND (live_children > 0 OR failures > 0)`, ids).Scan(&polled))
		return polled == parents
	})
	var done, failed int
	for _, id := range ids {
		task, err := tasks.Get(ctx, db, id)
		require.NoError(t, err)
		if task.LiveChildren == 1 {
			require.Zero(t, task.Failures)
			done++
			continue
		}
		failed++
		require.Contains(t, task.LastError, "task already exists", id)
	}
	require.Equal(t, 4, done, "one parent per key committed")
	require.Equal(t, parents-4, failed)
	for i := range 4 {
		child, err := tasks.GetByKey(ctx, db, keyedChildren.Type(), fmt.Sprintf("k%d", i))
		require.NoError(t, err)
		require.Contains(t, ids, child.Parent)
	}
}
