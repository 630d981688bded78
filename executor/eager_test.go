package executor_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// claimCounter counts the tasks the executor's claims took, the children its
// commits created claimed, and the polls' attempts and takeovers.
type claimCounter struct {
	executor.NoHooks
	claimed, children, commitErrs atomic.Int64
	mu                            sync.Mutex
	polls                         []executor.PollInfo
}

func (h *claimCounter) ClaimDone(_ context.Context, c *executor.ClaimInfo) {
	h.claimed.Add(int64(c.Claimed))
}

func (h *claimCounter) CommitDone(_ context.Context, c *executor.CommitInfo) {
	h.children.Add(int64(c.Children))
	if c.Err != nil {
		h.commitErrs.Add(1)
	}
}

func (h *claimCounter) PollStart(ctx context.Context, p *executor.PollInfo) context.Context {
	h.mu.Lock()
	h.polls = append(h.polls, *p)
	h.mu.Unlock()
	return ctx
}

type spawnerState struct {
	Spawned bool
	Ended   int
}

// spawner spawns n children of type "child" (each with a message when
// withMsg), awaits them, and ends once all have.
func spawner(n int, withMsg bool) executor.PollerFunc[spawnerState, struct{}] {
	return func(ctx context.Context, t *executor.Task[spawnerState, struct{}]) (executor.Action, error) {
		if !t.State.Spawned {
			t.State.Spawned = true
			for range n {
				var msg any
				if withMsg {
					msg = "hello"
				}
				t.Spawn("child", nil, msg)
			}
			return executor.AwaitChildren(), nil
		}
		for {
			m, ok := t.Inbox.Pop()
			if !ok {
				break
			}
			if m.Done {
				t.State.Ended++
			}
		}
		if t.State.Ended == n {
			return executor.Done(), nil
		}
		return executor.AwaitChildren(), nil
	}
}

// runEager runs a root of type "root" spawning n children under cfg, the
// children polled by child, and returns the hooks' counts once it is done.
func runEager(t *testing.T, cfg executor.Config, n int, withMsg bool, child executor.PollerFunc[any, any], opts ...executor.Option) *claimCounter {
	t.Helper()
	db := testdb.New(t)
	h := &claimCounter{}
	cfg.Hooks = h
	e := executor.MustNew(db, cfg)
	executor.Register(e, "root", spawner(n, withMsg))
	executor.Register(e, "child", child, opts...)
	root, err := tasks.Create(context.Background(), db, tasks.Spec{Type: "root"})
	require.NoError(t, err)
	stop := start(t, e)
	waitStatus(t, db, root, tasks.StatusDone)
	stop()
	return h
}

func doneAtOnce(context.Context, *executor.Task[any, any]) (executor.Action, error) {
	return executor.Done(), nil
}

// Children of a type the executor polls are created claimed by it and
// polled without a claim: the only claims are the root's two polls (spawn,
// then the wake-up once every child has ended).
func TestEagerChildrenArePolledWithoutAClaim(t *testing.T) {
	t.Parallel()
	h := runEager(t, fastConfig(t), 4, false, doneAtOnce)
	require.Equal(t, int64(4), h.children.Load())
	require.Equal(t, int64(2), h.claimed.Load())
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Len(t, h.polls, 6)
	for _, p := range h.polls {
		require.Equal(t, 1, p.Attempt, "%s", p.Type)
		require.False(t, p.TakenOver, "%s", p.Type)
		if p.Type == "child" {
			require.False(t, p.Parent.IsZero(), "a child knows its parent")
		}
	}
}

func TestDisableEagerChildren(t *testing.T) {
	t.Parallel()
	cfg := fastConfig(t)
	cfg.DisableEagerChildren = true
	h := runEager(t, cfg, 4, false, doneAtOnce)
	require.Zero(t, h.children.Load())
	require.Equal(t, int64(6), h.claimed.Load(), "the root twice, each child once")
}

// A child spawned with a message is claimed as usual: the database stamps
// its envelope, and it is polled as stored.
func TestChildWithAMessageIsNotEager(t *testing.T) {
	t.Parallel()
	var got atomic.Int64
	h := runEager(t, fastConfig(t), 3, true, func(ctx context.Context, t *executor.Task[any, any]) (executor.Action, error) {
		if m, ok := t.Inbox.Pop(); ok && !m.From.IsZero() {
			got.Add(1)
		}
		return executor.Done(), nil
	})
	require.Zero(t, h.children.Load())
	require.Equal(t, int64(5), h.claimed.Load())
	require.Equal(t, int64(3), got.Load(), "each child found its first message, from its parent")
}

// No more children are created claimed than the executor has free slots:
// Concurrency bounds the polls running, eager or claimed.
func TestEagerChildrenRespectConcurrency(t *testing.T) {
	t.Parallel()
	cfg := fastConfig(t)
	cfg.Concurrency = 2
	var g gauge
	h := runEager(t, cfg, 5, false, func(context.Context, *executor.Task[any, any]) (executor.Action, error) {
		defer g.enter()()
		return executor.Done(), nil
	})
	require.Equal(t, int64(2), h.children.Load(), "two slots free when the root's spawn committed")
	require.Equal(t, int64(5), h.claimed.Load(), "the root twice, the three other children")
	require.LessOrEqual(t, g.peak.Load(), int64(2))
}

// A type's MaxConcurrency bounds its eager children too.
func TestEagerChildrenRespectMaxConcurrency(t *testing.T) {
	t.Parallel()
	var g gauge
	h := runEager(t, fastConfig(t), 4, false, func(context.Context, *executor.Task[any, any]) (executor.Action, error) {
		defer g.enter()()
		return executor.Done(), nil
	}, executor.MaxConcurrency(1))
	require.Equal(t, int64(1), h.children.Load())
	require.Equal(t, int64(1), g.peak.Load())
}

// A commit that fails creates no child, and gives back the slots it held
// for them: with one slot, the poll that follows and its child still run.
func TestFailedCommitGivesBackEagerSlots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	cfg := fastConfig(t)
	cfg.Concurrency = 1
	cfg.BackoffMin, cfg.BackoffMax = time.Millisecond, time.Millisecond
	h := &claimCounter{}
	cfg.Hooks = h
	e := executor.MustNew(db, cfg)
	var attempts atomic.Int64
	var childPolls atomic.Int64
	executor.Register(e, "root", executor.PollerFunc[spawnerState, struct{}](func(ctx context.Context, t *executor.Task[spawnerState, struct{}]) (executor.Action, error) {
		if t.State.Spawned {
			return executor.Done(), nil
		}
		t.State.Spawned = true
		t.Spawn("child", nil, nil)
		if attempts.Add(1) == 1 {
			t.Send(tasks.NewID(), "to nobody") // fails the commit
		}
		return executor.AwaitChildren(), nil
	}))
	executor.Register(e, "child", executor.PollerFunc[any, any](func(context.Context, *executor.Task[any, any]) (executor.Action, error) {
		childPolls.Add(1)
		return executor.Done(), nil
	}))
	root, err := tasks.Create(ctx, db, tasks.Spec{Type: "root"})
	require.NoError(t, err)
	stop := start(t, e)
	waitStatus(t, db, root, tasks.StatusDone)
	stop()
	require.Equal(t, int64(2), attempts.Load())
	require.Equal(t, int64(1), childPolls.Load(), "the failed commit's child was never created")
	require.Equal(t, int64(1), h.children.Load())
	require.Positive(t, h.commitErrs.Load())
	list, err := tasks.List(ctx, db, tasks.Filter{Parent: root, Limit: 10})
	require.NoError(t, err)
	require.Len(t, list, 1)
}

// An executor that stops gives back the claims of the eager children it
// was polling, as of any other poll: none is left to go stale.
func TestShutdownReleasesEagerChildren(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	cfg := fastConfig(t)
	cfg.ShutdownTimeout = 100 * time.Millisecond
	h := &claimCounter{}
	cfg.Hooks = h
	e := executor.MustNew(db, cfg)
	var entered sync.WaitGroup
	entered.Add(3)
	executor.Register(e, "root", spawner(3, false))
	executor.Register(e, "child", executor.PollerFunc[any, any](func(ctx context.Context, t *executor.Task[any, any]) (executor.Action, error) {
		entered.Done()
		<-ctx.Done()
		return executor.Action{}, context.Cause(ctx)
	}))
	root, err := tasks.Create(ctx, db, tasks.Spec{Type: "root"})
	require.NoError(t, err)
	stop := start(t, e)
	entered.Wait()
	stop()
	require.Equal(t, int64(3), h.children.Load())
	list, err := tasks.List(ctx, db, tasks.Filter{Parent: root, Limit: 10})
	require.NoError(t, err)
	require.Len(t, list, 3)
	for _, c := range list {
		require.NotEqual(t, tasks.StatusRunning, c.Status, "released, not left claimed")
		require.True(t, c.ClaimedBy.IsZero())
		require.Zero(t, c.Failures, "a release is not a failure")
	}
}

// Claims and eager children share the slots: a claim counts the free slots
// before it runs, and a batch may give some to its children meanwhile; the
// claimed tasks that no longer fit wait for a slot, so Concurrency and
// MaxConcurrency hold with a backlog of ready children.
func TestEagerChildrenAndClaimsShareTheSlots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	cfg := fastConfig(t)
	cfg.Concurrency = 3
	e := executor.MustNew(db, cfg)
	var all, kids gauge
	root := spawner(1, false)
	executor.Register(e, "root", executor.PollerFunc[spawnerState, struct{}](func(ctx context.Context, t *executor.Task[spawnerState, struct{}]) (executor.Action, error) {
		defer all.enter()()
		return root(ctx, t)
	}))
	executor.Register(e, "child", executor.PollerFunc[any, any](func(context.Context, *executor.Task[any, any]) (executor.Action, error) {
		defer all.enter()()
		defer kids.enter()()
		time.Sleep(time.Millisecond) // some work: polls that overlap show
		return executor.Done(), nil
	}), executor.MaxConcurrency(1))
	const n = 300
	specs := make([]tasks.Spec, 0, 2*n)
	for range n {
		specs = append(specs, tasks.Spec{Type: "root"}, tasks.Spec{Type: "child"})
	}
	_, err := tasks.CreateMany(ctx, db, specs)
	require.NoError(t, err)
	start(t, e)
	waitFor(t, "every task done", func() bool {
		list, err := tasks.List(ctx, db, tasks.Filter{Status: tasks.StatusDone, Limit: 3*n + 1})
		require.NoError(t, err)
		return len(list) == 3*n
	})
	require.LessOrEqual(t, all.peak.Load(), int64(3))
	require.Equal(t, int64(1), kids.peak.Load())
}

// A child its parent messages in the poll that spawns it finds the message
// in its inbox at its first poll: it is not created claimed (a message to a
// running task waits in inbox_next).
func TestChildMessagedByItsSpawnerIsNotEager(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	cfg := fastConfig(t)
	h := &claimCounter{}
	cfg.Hooks = h
	e := executor.MustNew(db, cfg)
	executor.Register(e, "root", executor.PollerFunc[spawnerState, struct{}](func(ctx context.Context, t *executor.Task[spawnerState, struct{}]) (executor.Action, error) {
		if t.State.Spawned {
			return executor.Done(), nil
		}
		t.State.Spawned = true
		t.Send(t.Spawn("child", nil, nil), "after the spawn")
		t.Spawn("child", nil, nil) // not messaged: eager
		return executor.AwaitChildren(), nil
	}))
	var inboxes sync.Map // child ID -> inbox lengths, by poll
	executor.Register(e, "child", executor.PollerFunc[any, string](func(ctx context.Context, t *executor.Task[any, string]) (executor.Action, error) {
		n := 0
		for {
			if _, ok := t.Inbox.Pop(); !ok {
				break
			}
			n++
		}
		got, _ := inboxes.LoadOrStore(t.ID, &[]int{})
		*got.(*[]int) = append(*got.(*[]int), n)
		return executor.Done(), nil
	}))
	root, err := tasks.Create(ctx, db, tasks.Spec{Type: "root"})
	require.NoError(t, err)
	stop := start(t, e)
	waitStatus(t, db, root, tasks.StatusDone)
	stop()
	require.Equal(t, int64(1), h.children.Load())
	var polls [][]int
	inboxes.Range(func(_, v any) bool {
		polls = append(polls, *v.(*[]int))
		return true
	})
	require.ElementsMatch(t, [][]int{{1}, {0}}, polls, "each child polled once; the messaged one with its message")
}
