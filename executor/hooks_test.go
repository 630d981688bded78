package executor_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// recorder keeps every event the executor reports to its hooks.
type recorder struct {
	executor.NoHooks
	mu         sync.Mutex
	claims     []executor.ClaimInfo
	started    []executor.PollInfo
	polls      map[tasks.ID][]executor.PollResult
	commits    []executor.CommitInfo
	heartbeats []executor.HeartbeatInfo
}

type ctxKey struct{}

func newRecorder() *recorder { return &recorder{polls: map[tasks.ID][]executor.PollResult{}} }

func (r *recorder) ClaimDone(_ context.Context, info *executor.ClaimInfo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.claims = append(r.claims, *info)
}

func (r *recorder) PollStart(ctx context.Context, info *executor.PollInfo) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started = append(r.started, *info)
	return context.WithValue(ctx, ctxKey{}, info.Task)
}

func (r *recorder) PollDone(ctx context.Context, info *executor.PollInfo, res *executor.PollResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ctx.Value(ctxKey{}) != info.Task {
		panic("PollDone did not get the context PollStart returned")
	}
	r.polls[info.Task] = append(r.polls[info.Task], *res)
}

func (r *recorder) CommitDone(_ context.Context, info *executor.CommitInfo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.commits = append(r.commits, *info)
}

func (r *recorder) HeartbeatDone(_ context.Context, info *executor.HeartbeatInfo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.heartbeats = append(r.heartbeats, *info)
}

// results returns the results of the polls of id so far.
func (r *recorder) results(id tasks.ID) []executor.PollResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]executor.PollResult(nil), r.polls[id]...)
}

// staleSearches counts the successful claims that also looked for expired
// claims.
func (r *recorder) staleSearches() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.claims {
		if c.Stale && c.Err == nil {
			n++
		}
	}
	return n
}

func (r *recorder) heartbeatCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.heartbeats)
}

// Each poll reports its start and how it settled: committed with its action
// and effects, failed, panicked, failed for good; claims and commits report
// their batch sizes.
func TestHooksReportEveryPoll(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	rec := newRecorder()
	cfg := fastConfig(t)
	cfg.Hooks = rec
	// A failed task waits an hour: however slowly the test runs, the second
	// PollOnce finds only the tasks the test made ready.
	cfg.BackoffMin, cfg.BackoffMax = time.Hour, time.Hour
	e := executor.MustNew(db, cfg)
	sink, err := tasks.Create(ctx, db, tasks.Spec{Type: "sink", WakeAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	executor.Register(e, "parent", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		if ctx.Value(ctxKey{}) != t.ID {
			return executor.Action{}, errors.New("the poll's context is not the one PollStart returned")
		}
		t.Spawn("kid", nil, nil)
		t.Spawn("kid", nil, nil)
		t.Send(sink, "hello")
		return executor.Sleep(time.Hour), nil
	}))
	executor.Register(e, "fails", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.Action{}, errors.New("on purpose")
	}), executor.MaxFailures(2))
	executor.Register(e, "panics", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		panic("boom")
	}))
	executor.Register(e, "kid", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.Done(), nil
	}))
	parent, err := tasks.Create(ctx, db, tasks.Spec{Type: "parent", Message: 1})
	require.NoError(t, err)
	fails, err := tasks.Create(ctx, db, tasks.Spec{Type: "fails"})
	require.NoError(t, err)
	panics, err := tasks.Create(ctx, db, tasks.Spec{Type: "panics"})
	require.NoError(t, err)

	n, err := e.PollOnce(ctx)
	require.Equal(t, 3, n)
	require.Error(t, err)
	require.Equal(t, []executor.PollResult{{Outcome: executor.OutcomeCommitted, Action: "sleep", Spawned: 2, Sent: 1,
		Duration: rec.results(parent)[0].Duration}}, rec.results(parent))
	f := rec.results(fails)
	require.Len(t, f, 1)
	require.Equal(t, executor.OutcomeFailed, f[0].Outcome)
	require.EqualError(t, f[0].Err, "on purpose")
	require.False(t, f[0].Ended)
	p := rec.results(panics)
	require.Len(t, p, 1)
	require.Equal(t, executor.OutcomePanicked, p[0].Outcome)
	var pe *executor.PanicError
	require.ErrorAs(t, p[0].Err, &pe)

	// The failing task's second failure ends it; the kids are done.
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET wake_at = now() WHERE task_id = $1`, fails)
	require.NoError(t, err)
	n, err = e.PollOnce(ctx)
	require.Equal(t, 3, n)
	require.Error(t, err)
	f = rec.results(fails)
	require.Len(t, f, 2)
	require.Equal(t, executor.OutcomeFailed, f[1].Outcome)
	require.True(t, f[1].Ended)

	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Len(t, rec.started, 6)
	attempts := map[tasks.ID][]int{}
	for _, s := range rec.started {
		attempts[s.Task] = append(attempts[s.Task], s.Attempt)
		if s.Type == "kid" {
			require.Equal(t, parent, s.Parent)
			require.Zero(t, rec.polls[s.Task][0].Spawned)
			require.Equal(t, "done", rec.polls[s.Task][0].Action)
		}
	}
	require.Equal(t, []int{1, 2}, attempts[fails], "attempt = failures before + 1")
	require.Equal(t, []int{1}, attempts[parent])
	require.Len(t, rec.claims, 2)
	require.Equal(t, 3, rec.claims[0].Claimed)
	require.Equal(t, 3, rec.claims[1].Claimed)
	require.NoError(t, rec.claims[0].Err)
	require.ElementsMatch(t, []string{"parent", "fails", "panics", "kid"}, rec.claims[0].Types)
	// PollOnce commits each poll on its own: the parent, then the two kids.
	require.Len(t, rec.commits, 3)
	for _, c := range rec.commits {
		require.Equal(t, 1, c.Polls)
		require.NoError(t, c.Err)
		require.Positive(t, c.Duration)
	}
}

// Run reports batched commits, heartbeat renewals, and polls whose task was
// canceled.
func TestHooksReportRunHeartbeatsAndCancel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	rec := newRecorder()
	cfg := fastConfig(t)
	cfg.Hooks = rec
	cfg.HeartbeatTimeout, cfg.HeartbeatInterval = testdb.LongHeartbeat, 50*time.Millisecond
	e := executor.MustNew(db, cfg)
	entered := make(chan struct{})
	executor.Register(e, "long", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		close(entered)
		<-ctx.Done()
		return executor.Yield(), nil
	}))
	executor.Register(e, "quick", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.Done(), nil
	}))
	long, err := tasks.Create(ctx, db, tasks.Spec{Type: "long"})
	require.NoError(t, err)
	quick := createN(t, db, "quick", 20)
	start(t, e)
	<-entered
	waitFor(t, "two heartbeats", func() bool { return rec.heartbeatCount() >= 2 })
	require.NoError(t, tasks.Cancel(ctx, db, long))
	waitFor(t, "the canceled poll to settle", func() bool { return len(rec.results(long)) == 1 })
	res := rec.results(long)[0]
	require.Equal(t, executor.OutcomeCanceled, res.Outcome)
	require.ErrorIs(t, res.Err, executor.ErrCanceled)
	for _, id := range quick {
		waitFor(t, "quick tasks committed", func() bool { return len(rec.results(id)) == 1 })
		require.Equal(t, executor.OutcomeCommitted, rec.results(id)[0].Outcome)
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	polls := 0
	for _, c := range rec.commits {
		require.NoError(t, c.Err)
		polls += c.Polls
	}
	require.Equal(t, len(quick), polls, "every committed poll in one commit")
	for _, h := range rec.heartbeats[:2] {
		require.NoError(t, h.Err)
		require.Positive(t, h.Claims)
		require.Positive(t, h.Duration)
	}
}

// A poll whose claim another executor took over (its heartbeat went stale)
// reports the lost claim; the executor that took it over commits.
func TestHooksReportClaimTakenOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	db := testdb.Pool(t, url)
	recA, recB := newRecorder(), newRecorder()

	cfgA := fastConfig(t)
	// A's claims last an hour: only the test makes A's claim expire.
	cfgA.HeartbeatTimeout, cfgA.HeartbeatInterval = testdb.LongHeartbeat, 200*time.Millisecond
	cfgA.Concurrency = 1
	cfgA.Hooks = recA
	a := executor.MustNew(testdb.Pool(t, url), cfgA)
	aEntered := make(chan struct{})
	executor.Register(a, "job", executor.PollerFunc[string, int](func(ctx context.Context, t *executor.Task[string, int]) (executor.Action, error) {
		close(aEntered)
		<-ctx.Done()
		return executor.DoneWith("A"), nil
	}))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	start(t, a)
	<-aEntered

	cfgB := fastConfig(t)
	cfgB.Hooks = recB
	b := executor.MustNew(testdb.Pool(t, url), cfgB)
	executor.Register(b, "job", executor.PollerFunc[string, int](func(ctx context.Context, t *executor.Task[string, int]) (executor.Action, error) {
		return executor.DoneWith("B"), nil
	}))
	start(t, b)
	// A stalls: its claim expires, and B takes the task over.
	expireUntilTakenOver(t, db, id)
	waitStatus(t, db, id, tasks.StatusDone)
	waitFor(t, "A's poll to settle", func() bool { return len(recA.results(id)) == 1 })
	// The commit is seen before its PollDone is.
	waitFor(t, "B's poll to settle", func() bool { return len(recB.results(id)) == 1 })
	res := recA.results(id)[0]
	require.Equal(t, executor.OutcomeClaimLost, res.Outcome)
	require.ErrorIs(t, res.Err, executor.ErrClaimLost)
	require.Equal(t, []executor.PollResult{{Outcome: executor.OutcomeCommitted, Action: "done", Duration: recB.results(id)[0].Duration}},
		recB.results(id))
	recA.mu.Lock()
	require.False(t, recA.started[0].TakenOver)
	recA.mu.Unlock()
	recB.mu.Lock()
	defer recB.mu.Unlock()
	require.Len(t, recB.started, 1)
	require.True(t, recB.started[0].TakenOver, "B took the task over from A's expired claim")
	require.Equal(t, 2, recB.started[0].Attempt, "the takeover counted A's attempt")
}

// A hook's PollStart may return a context carrying values; a nil Hooks field
// behaves as before.
func TestHooksAreOptional(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	executor.Register(e, "job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		if ctx.Value(ctxKey{}) != nil {
			return executor.Action{}, fmt.Errorf("unexpected context value")
		}
		return executor.Done(), nil
	}))
	_, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
}
