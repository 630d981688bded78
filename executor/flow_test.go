package executor_test

import (
	"context"
	"encoding/json"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// Claims take the highest priority first, then the oldest.
func TestClaimsTakeHigherPriorityFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	cfg := fastConfig(t)
	cfg.Concurrency = 1
	e := executor.MustNew(db, cfg)
	var order []string
	executor.Register(e, "job", executor.PollerFunc[string, int](func(ctx context.Context, t *executor.Task[string, int]) (executor.Action, error) {
		order = append(order, t.State)
		return executor.Done(), nil
	}))
	_, err := tasks.CreateMany(ctx, db, []tasks.Spec{
		{Type: "job", State: "low-1"}, {Type: "job", State: "low-2"},
		{Type: "job", State: "mid", Priority: 3}, {Type: "job", State: "high", Priority: 7},
		{Type: "job", State: "mid-later", Priority: 3},
	})
	require.NoError(t, err)
	for range 5 {
		n, err := e.PollOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
	}
	require.Equal(t, []string{"high", "mid", "mid-later", "low-1", "low-2"}, order)
}

// A child's priority, set at its spawn, orders its claim.
func TestSpawnSpecSetsPriorityAndLimitKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	cfg := fastConfig(t)
	cfg.DisableEagerChildren = true
	e := executor.MustNew(db, cfg)
	var child tasks.ID
	executor.Register(e, "parent", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		child = t.SpawnSpec(tasks.Spec{Type: "child", Priority: 9, LimitKey: "acct-1"})
		return executor.AwaitChildren(), nil
	}))
	_, err := tasks.Create(ctx, db, tasks.Spec{Type: "parent"})
	require.NoError(t, err)
	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	var prio int
	var key string
	require.NoError(t, db.QueryRow(ctx, `SELECT priority, limit_key FROM corotask.tasks WHERE task_id = $1`, child).Scan(&prio, &key))
	require.Equal(t, 9, prio)
	require.Equal(t, "acct-1", key)
}

// Bad priorities and limit keys are refused, naming what is wrong, and
// create nothing.
func TestBadPriorityRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	_, err := tasks.Create(ctx, db, tasks.Spec{Type: "job", Priority: -1})
	require.ErrorContains(t, err, "invalid priority -1")
	_, err = tasks.Create(ctx, db, tasks.Spec{Type: "job", Priority: tasks.MaxPriority + 1})
	require.ErrorContains(t, err, "invalid priority 32768")
	_, err = tasks.Create(ctx, db, tasks.Spec{Type: "job", LimitKey: "a\x01b"})
	require.ErrorContains(t, err, "limit key")
	var n int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM corotask.tasks`).Scan(&n))
	require.Zero(t, n)
}

// setControls runs sql: what time or a dead executor would do.
func setControls(t *testing.T, db *pgxpool.Pool, sql string) {
	t.Helper()
	_, err := db.Exec(context.Background(), sql)
	require.NoError(t, err)
}

// gatedPoller blocks each poll until gate closes, counting the polls in
// flight.
func gatedPoller(g *gauge, gate <-chan struct{}) executor.PollerFunc[int, int] {
	return func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		defer g.enter()()
		select {
		case <-gate:
		case <-ctx.Done():
			return executor.Action{}, ctx.Err()
		}
		return executor.Done(), nil
	}
}

// keyedGatedPoller blocks each poll until gate closes, but for those of
// the states ungated, counting the polls in flight (g) and those of each
// state (keys: the tests give a task its limit key as its state).
func keyedGatedPoller(g *gauge, keys *keyGauge, gate <-chan struct{}, ungated ...string) executor.PollerFunc[string, int] {
	return func(ctx context.Context, t *executor.Task[string, int]) (executor.Action, error) {
		defer g.enter()()
		defer keys.enter(t.State)()
		if slices.Contains(ungated, t.State) {
			return executor.Done(), nil
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return executor.Action{}, ctx.Err()
		}
		return executor.Done(), nil
	}
}

// A fleet-wide maximum holds across executors: two executors with room for
// eight polls each run at most two of the type at once.
func TestMaxRunningAcrossExecutors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	require.NoError(t, tasks.SetMaxRunning(ctx, db, "limited", 2, tasks.AllowNewType()))
	var g gauge
	gate := make(chan struct{})
	for range 2 {
		e := executor.MustNew(db, fastConfig(t))
		executor.Register(e, "limited", gatedPoller(&g, gate))
		start(t, e)
	}
	createN(t, db, "limited", 12)
	waitFor(t, "two polls running", func() bool { return g.cur.Load() == 2 })
	close(gate)
	waitFor(t, "all done", func() bool {
		list, err := tasks.List(ctx, db, tasks.Filter{Status: tasks.StatusDone, Limit: 13})
		require.NoError(t, err)
		return len(list) == 12
	})
	require.Equal(t, int64(2), g.peak.Load())
}

// Far from the maximum, executors claim side by side (their claims hold
// the type's controls shared, each taking at most a share); near it, one
// after the other. Four executors with room for 24 polls, a maximum of 12
// (a share of 2: shared while 4 executors x 2 fit over those running), and
// polls that end at once: the claims cross between the two ways all along,
// and the maximum holds.
func TestMaxRunningHoldsAsClaimsShareAndTakeTurns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	require.NoError(t, tasks.SetMaxRunning(ctx, db, "limited", 12, tasks.AllowNewType()))
	var g gauge
	poller := executor.PollerFunc[json.RawMessage, json.RawMessage](
		func(ctx context.Context, t *executor.Task[json.RawMessage, json.RawMessage]) (executor.Action, error) {
			defer g.enter()()
			runtime.Gosched()
			return executor.Done(), nil
		})
	for range 4 {
		cfg := fastConfig(t)
		cfg.Concurrency = 6
		e := executor.MustNew(db, cfg)
		executor.Register(e, "limited", poller)
		start(t, e)
	}
	createN(t, db, "limited", 400)
	waitDone(t, db, 400)
	require.LessOrEqual(t, g.peak.Load(), int64(12))
	require.Positive(t, g.peak.Load())
}

// A slot held by an executor that died comes back when its claim expires:
// executor A holds the only slot of the type, in a poll that never ends,
// and stops renewing its claim; executor B claims nothing until that claim
// expires, then takes the slot.
func TestDeadExecutorsSlotComesBackWhenItsClaimExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	db := testdb.Pool(t, url)
	require.NoError(t, tasks.SetMaxRunning(ctx, db, "limited", 1, tasks.AllowNewType()))
	first, err := tasks.Create(ctx, db, tasks.Spec{Type: "limited"})
	require.NoError(t, err)

	// A's claim lasts an hour, and A does not renew it while the test runs.
	cfgA := fastConfig(t)
	cfgA.HeartbeatTimeout, cfgA.HeartbeatInterval = testdb.LongHeartbeat, 20*time.Minute
	a := executor.MustNew(testdb.Pool(t, url), cfgA)
	entered, release := make(chan struct{}), make(chan struct{})
	// A polls one task of the type at most (it still polls the first when
	// its claim is taken over), so that only B claims the second.
	executor.Register(a, "limited", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		close(entered)
		<-release
		return executor.Done(), nil
	}), executor.MaxConcurrency(1))
	stopA := start(t, a)
	defer stopA()
	defer close(release)
	<-entered

	second, err := tasks.Create(ctx, db, tasks.Spec{Type: "limited"})
	require.NoError(t, err)
	b := executor.MustNew(testdb.Pool(t, url), fastConfig(t))
	var polled []tasks.ID
	executor.Register(b, "limited", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		polled = append(polled, t.ID)
		return executor.Done(), nil
	}))
	n, err := b.PollOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "A holds the only slot")

	// A dies: its claim expires, unrenewed.
	setControls(t, db, `UPDATE corotask.tasks SET claim_expires_at = now() - interval '1 minute' WHERE task_id = '`+first.UUID()+`'`)
	n, err = b.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the expired claim gave its slot back")
	n, err = b.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.ElementsMatch(t, []tasks.ID{first, second}, polled, "B took over A's task, then the other")
}

// A pause lets the poll in flight finish, and starts no other until resumed.
func TestPauseLetsThePollInFlightFinish(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	var g gauge
	gate := make(chan struct{})
	executor.Register(e, "job", gatedPoller(&g, gate))
	first, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	polled := make(chan int, 1)
	go func() {
		n, err := e.PollOnce(ctx)
		if err != nil {
			n = -1
		}
		polled <- n
	}()
	waitFor(t, "the poll in flight", func() bool { return g.cur.Load() == 1 })
	require.NoError(t, tasks.Pause(ctx, db, "job"))
	second, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	close(gate)
	require.Equal(t, 1, <-polled)
	got, err := tasks.Get(ctx, db, first)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusDone, got.Status)

	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "a paused type is not claimed")
	require.NoError(t, tasks.Resume(ctx, db, "job"))
	n, err = e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	got, err = tasks.Get(ctx, db, second)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusDone, got.Status)
}

// A key limit holds across the types of its key space: one task per
// account at a time, whatever its type; other accounts run meanwhile.
func TestKeyLimitAcrossTypes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	require.NoError(t, tasks.SetKeyLimit(ctx, db, "account", 1, []tasks.Type{"charge", "refund"}, tasks.AllowNewType()))
	keys := newKeyGauge()
	var g gauge
	gate := make(chan struct{})
	poller := keyedGatedPoller(&g, keys, gate)
	e := executor.MustNew(db, fastConfig(t))
	executor.Register(e, "charge", poller)
	executor.Register(e, "refund", poller)
	_, err := tasks.CreateMany(ctx, db, []tasks.Spec{
		{Type: "charge", State: "a", LimitKey: "a"}, {Type: "refund", State: "a", LimitKey: "a"},
		{Type: "charge", State: "a", LimitKey: "a"}, {Type: "charge", State: "b", LimitKey: "b"},
		{Type: "refund", State: "none"},
	})
	require.NoError(t, err)
	start(t, e)
	waitFor(t, "one task of each account and the unkeyed one", func() bool { return g.cur.Load() == 3 })
	require.Equal(t, map[string]int{"a": 1, "b": 1, "none": 1}, keys.now())
	close(gate)
	waitFor(t, "all done", func() bool {
		list, err := tasks.List(ctx, db, tasks.Filter{Status: tasks.StatusDone, Limit: 6})
		require.NoError(t, err)
		return len(list) == 5
	})
	require.Equal(t, map[string]int{"a": 1, "b": 1, "none": 1}, keys.most())
}

// A type whose controls were a maximum only at the executor's last claim,
// which then claims it with the lean statements (they read no key space),
// is held to a key space it gains at once: the lean claim sees the key
// space, takes nothing, and the claim is made again with the full ones.
func TestKeySpaceGainedWhileClaimingLeanHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	require.NoError(t, tasks.SetMaxRunning(ctx, db, "charge", 100, tasks.AllowNewType()))
	keys := newKeyGauge()
	var g gauge
	gate := make(chan struct{})
	e := executor.MustNew(db, fastConfig(t))
	executor.Register(e, "charge", keyedGatedPoller(&g, keys, gate, "warm-up"))
	start(t, e)
	// A first claim finds a maximum only: the next claims are lean.
	_, err := tasks.Create(ctx, db, tasks.Spec{Type: "charge", State: "warm-up"})
	require.NoError(t, err)
	waitDone(t, db, 1)

	require.NoError(t, tasks.SetKeyLimit(ctx, db, "account", 1, []tasks.Type{"charge"}))
	_, err = tasks.CreateMany(ctx, db, []tasks.Spec{
		{Type: "charge", State: "a", LimitKey: "a"}, {Type: "charge", State: "a", LimitKey: "a"},
		{Type: "charge", State: "a", LimitKey: "a"}, {Type: "charge", State: "none"},
	})
	require.NoError(t, err)
	waitFor(t, "one task of the account and the unkeyed one", func() bool { return g.cur.Load() == 2 })
	close(gate)
	waitDone(t, db, 5)
	require.Equal(t, map[string]int{"warm-up": 1, "a": 1, "none": 1}, keys.most())
}

// Tasks over their key's limit wait in claim order: the oldest of the key
// runs first.
func TestKeyLimitWaitsInOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	require.NoError(t, tasks.SetKeyLimit(ctx, db, "account", 1, []tasks.Type{"charge"}, tasks.AllowNewType()))
	var order []string
	e := executor.MustNew(db, fastConfig(t))
	executor.Register(e, "charge", executor.PollerFunc[string, int](func(ctx context.Context, t *executor.Task[string, int]) (executor.Action, error) {
		order = append(order, t.State)
		return executor.Done(), nil
	}))
	for _, s := range []string{"1", "2", "3"} {
		_, err := tasks.Create(ctx, db, tasks.Spec{Type: "charge", State: s, LimitKey: "acct"})
		require.NoError(t, err)
	}
	for range 3 {
		n, err := e.PollOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n, "one task of the key at a time")
	}
	require.Equal(t, []string{"1", "2", "3"}, order)
}

// commitsSeen counts the children commits created claimed.
type commitsSeen struct {
	executor.NoHooks
	children atomic.Int64
}

func (h *commitsSeen) CommitDone(_ context.Context, info *executor.CommitInfo) {
	h.children.Add(int64(info.Children))
}

// A child of a type with controls is never polled without a claim that
// counts it, even when the controls were set after the executor's last
// claim: the commit creates it ready.
func TestEagerChildOfControlledTypeIsCreatedReady(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	hooks := &commitsSeen{}
	cfg := fastConfig(t)
	cfg.Hooks = hooks
	e := executor.MustNew(db, cfg)
	gate := make(chan struct{})
	spawning := make(chan struct{}, 1)
	executor.Register(e, "parent", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		spawning <- struct{}{}
		<-gate
		t.Spawn("child", nil, nil)
		return executor.AwaitChildren(), nil
	}))
	executor.Register(e, "child", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.Done(), nil
	}))
	_, err := tasks.Create(ctx, db, tasks.Spec{Type: "parent"})
	require.NoError(t, err)
	start(t, e)
	<-spawning
	// Set after the claim of the parent: the executor does not know yet.
	require.NoError(t, tasks.SetMaxRunning(ctx, db, "child", 5, tasks.AllowNewType()))
	close(gate)
	waitFor(t, "the child done", func() bool {
		list, err := tasks.List(ctx, db, tasks.Filter{Type: "child", Status: tasks.StatusDone, Limit: 2})
		require.NoError(t, err)
		return len(list) == 1
	})
	require.Zero(t, hooks.children.Load(), "no child was created claimed")
	var attempts int
	require.NoError(t, db.QueryRow(ctx, `SELECT attempts FROM corotask.tasks WHERE task_type = 'child'`).Scan(&attempts))
	require.Equal(t, 1, attempts, "the child was polled once, by a claim")
}

// A rate limit starts at most its rate of polls per interval, fleet-wide,
// and refills as time passes.
func TestRateLimitStartsAtMostItsRate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	require.NoError(t, tasks.SetRateLimit(ctx, db, "mail", 2, time.Hour, []tasks.Type{"mail"}, tasks.AllowNewType()))
	createN(t, db, "mail", 5)
	e := executor.MustNew(db, fastConfig(t))
	executor.Register(e, "mail", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.Done(), nil
	}))
	polls := func() int {
		total := 0
		for {
			n, err := e.PollOnce(ctx)
			require.NoError(t, err)
			if n == 0 {
				return total
			}
			total += n
		}
	}
	require.Equal(t, 2, polls(), "the bucket holds two tokens")
	// Half an hour later the bucket has refilled one token.
	setControls(t, db, `UPDATE corotask.rate_limits SET refilled_at = refilled_at - interval '30 minutes'`)
	require.Equal(t, 1, polls())
	var tokens float64
	require.NoError(t, db.QueryRow(ctx, `SELECT tokens FROM corotask.rate_limits`).Scan(&tokens))
	require.Less(t, tokens, 1.0)
}

// Two executors claiming at once take the high-priority tasks first: each
// skips those the other locked, and takes the next of the highest priority.
func TestPriorityOrderUnderConcurrentClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	var mu sync.Mutex
	polled := map[string]int{} // the state of each task polled, by round
	round := 0
	executors := make([]*executor.Executor, 2)
	for i := range executors {
		cfg := fastConfig(t)
		cfg.Concurrency = 1
		executors[i] = executor.MustNew(db, cfg)
		executor.Register(executors[i], "job", executor.PollerFunc[string, int](func(ctx context.Context, t *executor.Task[string, int]) (executor.Action, error) {
			mu.Lock()
			polled[t.State] = round
			mu.Unlock()
			return executor.Done(), nil
		}))
	}
	specs := []tasks.Spec{}
	for i := range 10 {
		specs = append(specs, tasks.Spec{Type: "job", State: "low-" + string(rune('a'+i))})
	}
	for i := range 5 {
		specs = append(specs, tasks.Spec{Type: "job", State: "high-" + string(rune('a'+i)), Priority: 1 + i%2})
	}
	_, err := tasks.CreateMany(ctx, db, specs)
	require.NoError(t, err)
	for r := 1; r <= 3; r++ {
		mu.Lock()
		round = r
		mu.Unlock()
		var wg sync.WaitGroup
		for _, e := range executors {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n, err := e.PollOnce(ctx)
				require.NoError(t, err)
				require.Equal(t, 1, n)
			}()
		}
		wg.Wait()
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range 5 {
		r, ok := polled["high-"+string(rune('a'+i))]
		require.True(t, ok, "every high-priority task is among the first six polls")
		require.LessOrEqual(t, r, 3)
	}
	require.Len(t, polled, 6)
	require.Equal(t, 1, polled["high-b"], "priority 2 comes first")
	require.Equal(t, 1, polled["high-d"], "priority 2 comes first")
}

// A Handle creates and spawns tasks with a priority and a limit key.
func TestHandleWithOptions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	job := executor.NewHandle[string, int]("job")
	child := executor.NewHandle[string, int]("child")
	cfg := fastConfig(t)
	cfg.DisableEagerChildren = true
	e := executor.MustNew(db, cfg)
	var spawned tasks.ID
	executor.Register(e, job.Type(), executor.PollerFunc[string, int](func(ctx context.Context, t *executor.Task[string, int]) (executor.Action, error) {
		spawned = child.SpawnWithOptions(t, "c", executor.TaskOptions{Priority: 4, LimitKey: "k2"})
		return executor.AwaitChildren(), nil
	}))
	id, err := job.CreateWithOptions(ctx, db, "p", executor.TaskOptions{Key: "one", Priority: 2, LimitKey: "k1"})
	require.NoError(t, err)
	got, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, 2, got.Priority)
	require.Equal(t, "k1", got.LimitKey)
	require.Equal(t, "one", got.Key)
	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	got, err = tasks.Get(ctx, db, spawned)
	require.NoError(t, err)
	require.Equal(t, 4, got.Priority)
	require.Equal(t, "k2", got.LimitKey)
	require.Equal(t, id, got.Parent)
}

// An expired claim that counts toward a limit is not revived by its
// executor's next renewal (another poll may have its slot by then): the
// poll loses its claim.
func TestExpiredLimitedClaimIsNotRenewed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	require.NoError(t, tasks.SetMaxRunning(ctx, db, "limited", 1, tasks.AllowNewType()))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "limited"})
	require.NoError(t, err)
	cfg := fastConfig(t)
	cfg.HeartbeatInterval = 20 * time.Millisecond
	e := executor.MustNew(db, cfg)
	entered := make(chan struct{})
	lost := make(chan error, 1)
	executor.Register(e, "limited", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		close(entered)
		<-ctx.Done()
		lost <- context.Cause(ctx)
		return executor.Action{}, ctx.Err()
	}))
	start(t, e)
	<-entered
	// The executor stalls past its claim's expiry (nobody takes it over).
	setControls(t, db, `UPDATE corotask.tasks SET claim_expires_at = now() - interval '1 second' WHERE task_id = '`+id.UUID()+`'`)
	select {
	case err := <-lost:
		require.ErrorIs(t, err, executor.ErrClaimLost)
	case <-time.After(testdb.Patience):
		t.Fatal("the expired claim was renewed")
	}
}

// An expired claim that counts toward no limit (its type has no controls,
// and its counted is NULL) is renewed by its executor's next renewal, when
// nobody took it over meanwhile: the poll goes on and commits.
func TestExpiredUnlimitedClaimIsRenewed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "free"})
	require.NoError(t, err)
	cfg := fastConfig(t)
	cfg.HeartbeatInterval = 20 * time.Millisecond
	e := executor.MustNew(db, cfg)
	entered := make(chan struct{})
	release := make(chan struct{})
	executor.Register(e, "free", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		close(entered)
		select {
		case <-release:
			return executor.Done(), nil
		case <-ctx.Done():
			return executor.Action{}, context.Cause(ctx)
		}
	}))
	start(t, e)
	<-entered
	var counted *bool
	require.NoError(t, db.QueryRow(ctx, `SELECT counted FROM corotask.tasks WHERE task_id = $1`, id).Scan(&counted))
	require.Nil(t, counted, "a claim of a type without controls leaves counted NULL")
	// The executor stalls past its claim's expiry (nobody takes it over).
	setControls(t, db, `UPDATE corotask.tasks SET claim_expires_at = now() - interval '1 second' WHERE task_id = '`+id.UUID()+`'`)
	waitFor(t, "the expired claim renewed", func() bool {
		var renewed bool
		require.NoError(t, db.QueryRow(ctx, `SELECT claim_expires_at > now() FROM corotask.tasks WHERE task_id = $1`, id).Scan(&renewed))
		return renewed
	})
	close(release)
	waitStatus(t, db, id, tasks.StatusDone)
}

// A type its controls hold back does not hold back the executor's other
// types, however many of its tasks wait ahead of theirs.
func TestHeldTypeDoesNotStarveTheOthers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	cfg := fastConfig(t)
	cfg.Concurrency = 2
	e := executor.MustNew(db, cfg)
	var polled []tasks.Type
	poller := executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		polled = append(polled, t.Type)
		return executor.Done(), nil
	})
	executor.Register(e, "held", poller)
	executor.Register(e, "free", poller)
	createN(t, db, "held", 5)
	_, err := tasks.Create(ctx, db, tasks.Spec{Type: "free"})
	require.NoError(t, err)
	require.NoError(t, tasks.Pause(ctx, db, "held"))
	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []tasks.Type{"free"}, polled)
}
