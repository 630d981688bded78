package executor_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// On Citus, a paused type is not claimed, and is once resumed; a type
// with a rate limit takes no more polls than its tokens, shared with the
// other types of the limit, and the tokens a claim did not use stay.
func TestCitusPauseAndRateLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Citus(t)
	e := executor.MustNew(db, fastConfig(t))
	for _, typ := range []tasks.Type{"paused", "mail", "sms"} {
		executor.Register(e, typ, executor.PollerFunc[any, any](doneAtOnce))
	}
	createN(t, db, "paused", 3)
	require.NoError(t, tasks.Pause(ctx, db, "paused"))
	require.Zero(t, pollUntilIdle(t, e), "a paused type is not claimed")
	require.NoError(t, tasks.Resume(ctx, db, "paused"))
	require.Equal(t, 3, pollUntilIdle(t, e))

	// Five tokens an hour for two types, and seven tasks of them.
	require.NoError(t, tasks.SetRateLimit(ctx, db, "outbox", 5, time.Hour, []tasks.Type{"mail", "sms"}, tasks.AllowNewType()))
	createN(t, db, "mail", 4)
	createN(t, db, "sms", 3)
	require.Equal(t, 5, pollUntilIdle(t, e))
	var tokens float64
	require.NoError(t, db.QueryRow(ctx, `SELECT tokens FROM corotask.rate_limits WHERE name = 'outbox'`).Scan(&tokens))
	require.Less(t, tokens, 1.0, "the five tokens were taken")
	require.GreaterOrEqual(t, tokens, 0.0, "and no more")
	var ready int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM corotask.tasks WHERE task_type IN ('mail', 'sms') AND done_at IS NULL`).Scan(&ready))
	require.Equal(t, 2, ready)

	// Unused tokens are given back: with the limit raised, a claim that
	// finds two tasks takes two tokens of the new ones.
	require.NoError(t, tasks.SetRateLimit(ctx, db, "outbox", 1000, time.Hour, []tasks.Type{"mail", "sms"}))
	_, err := db.Exec(ctx, `UPDATE corotask.rate_limits SET tokens = 10, refilled_at = $1 WHERE name = 'outbox'`, time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, 2, pollUntilIdle(t, e))
	require.NoError(t, db.QueryRow(ctx, `SELECT tokens FROM corotask.rate_limits WHERE name = 'outbox'`).Scan(&tokens))
	require.InDelta(t, 8, tokens, 0.001)

	// A poll's own acquisitions take from the same bucket.
	wait, err := tasks.Acquire(ctx, db, "outbox", 8)
	require.NoError(t, err)
	require.Zero(t, wait)
	wait, err = tasks.Acquire(ctx, db, "outbox", 1)
	require.NoError(t, err)
	require.Positive(t, wait, "the bucket is empty")
}

// runningGauge counts the polls of a type running at once, and keeps the
// most it saw; claims counts the claim statements made.
type runningGauge struct {
	executor.NoHooks
	running, most, claims atomic.Int64
}

func (g *runningGauge) ClaimDone(context.Context, *executor.ClaimInfo) { g.claims.Add(1) }

func (g *runningGauge) start() {
	n := g.running.Add(1)
	for {
		m := g.most.Load()
		if n <= m || g.most.CompareAndSwap(m, n) {
			return
		}
	}
}

// On Citus, a type's fleet-wide maximum holds across two executors, each
// with room for more: with two polls running and held, the executors keep
// claiming and start no third; released, every task is polled, and never
// more than two at once.
func TestCitusFleetWideMaximum(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Citus(t)
	require.NoError(t, tasks.SetMaxRunning(ctx, db, "capped", 2, tasks.AllowNewType()))
	ids := createN(t, db, "capped", 12)
	gauge := &runningGauge{}
	release := make(chan struct{})
	for range 2 {
		cfg := fastConfig(t)
		cfg.Hooks = gauge
		e := executor.MustNew(db, cfg)
		executor.Register(e, "capped", executor.PollerFunc[any, any](
			func(ctx context.Context, t *executor.Task[any, any]) (executor.Action, error) {
				gauge.start()
				defer gauge.running.Add(-1)
				<-release
				return executor.Done(), nil
			}))
		start(t, e)
	}
	waitFor(t, "two polls", func() bool { return gauge.running.Load() >= 2 })
	// Twenty more claims, between them, while the two are held.
	claims := gauge.claims.Load()
	waitFor(t, "more claims", func() bool { return gauge.claims.Load() >= claims+20 })
	require.EqualValues(t, 2, gauge.running.Load(), "no third poll started")
	var counted int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM corotask.tasks WHERE claim IS NOT NULL AND counted`).Scan(&counted))
	require.Equal(t, 2, counted, "the two claims count toward the maximum")

	close(release)
	waitDone(t, db, len(ids))
	require.EqualValues(t, 2, gauge.most.Load(), "never more than the maximum at once")
}

// The controls lock that a claim holds on Citus ends with its session if
// the session stays idle past the executor's heartbeat timeout (an executor
// frozen mid-claim): a pause, which waits for the lock, then goes through.
func TestCitusControlsLockEndsWithAnIdleSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Citus(t)
	holder, err := pgx.Connect(ctx, db.Config().ConnString())
	require.NoError(t, err)
	defer holder.Close(ctx)
	_, err = holder.Exec(ctx, query.CitusClaimBegin, testdb.LongHeartbeat.Milliseconds())
	require.NoError(t, err)
	var timeout time.Duration
	require.NoError(t, holder.QueryRow(ctx, `SELECT current_setting('idle_session_timeout')::interval`).Scan(&timeout))
	require.Equal(t, testdb.LongHeartbeat, timeout, "the claim's session ends idle after its heartbeat timeout")
	paused := make(chan error, 1)
	go func() { paused <- tasks.Pause(ctx, db, "frozen", tasks.AllowNewType()) }()
	testdb.WaitForLockWait(t, db)
	select {
	case err := <-paused:
		t.Fatalf("the pause did not wait for the claim's lock: %v", err)
	default:
	}
	// The holder's timeout, shortened now that the pause waits; then it
	// sends nothing more, as a frozen executor would.
	_, err = holder.Exec(ctx, `SELECT set_config('idle_session_timeout', '100', false)`)
	require.NoError(t, err)
	require.NoError(t, <-paused)
	require.Error(t, holder.Ping(ctx), "the idle session was ended")
}

// On Citus, a key space's limit per key holds across its types, shards and
// executors: with each task the root of a tree of its own (so spread over
// the shards), two executors run one task of each account at a time and
// the tasks without a key beside them; while those are held they keep
// claiming and start no second task of an account; released, every task
// is polled, and never two of an account at once.
func TestCitusKeyLimitAcrossTypes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Citus(t)
	require.NoError(t, tasks.SetKeyLimit(ctx, db, "account", 1, []tasks.Type{"charge", "refund"}, tasks.AllowNewType()))
	var specs []tasks.Spec
	for i := range 6 {
		typ := []tasks.Type{"charge", "refund"}[i%2]
		specs = append(specs, tasks.Spec{Type: typ, State: "a", LimitKey: "a"}, tasks.Spec{Type: typ, State: "b", LimitKey: "b"})
	}
	specs = append(specs, tasks.Spec{Type: "refund", State: "none"}, tasks.Spec{Type: "charge", State: "none"})
	_, err := tasks.CreateMany(ctx, db, specs)
	require.NoError(t, err)

	keys := newKeyGauge()
	gauge := &runningGauge{}
	release := make(chan struct{})
	poller := executor.PollerFunc[string, any](func(ctx context.Context, t *executor.Task[string, any]) (executor.Action, error) {
		gauge.start()
		defer gauge.running.Add(-1)
		defer keys.enter(t.State)()
		<-release
		return executor.Done(), nil
	})
	for range 2 {
		cfg := fastConfig(t)
		cfg.Hooks = gauge
		e := executor.MustNew(db, cfg)
		executor.Register(e, "charge", poller)
		executor.Register(e, "refund", poller)
		start(t, e)
	}
	waitFor(t, "one task of each account and both without a key", func() bool { return gauge.running.Load() >= 4 })
	claims := gauge.claims.Load()
	waitFor(t, "more claims", func() bool { return gauge.claims.Load() >= claims+20 })
	require.Equal(t, map[string]int{"a": 1, "b": 1, "none": 2}, keys.now())

	close(release)
	waitDone(t, db, len(specs))
	require.Equal(t, map[string]int{"a": 1, "b": 1, "none": 2}, keys.most(), "never two tasks of an account at once")
}

// On Citus, a type whose rate limit ran out of tokens is claimed again at
// its next token, as on one server, not at the next PollInterval (here
// longer than the test waits).
func TestCitusRateLimitWakesAtTheNextToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Citus(t)
	require.NoError(t, tasks.SetRateLimit(ctx, db, "slow", 1, time.Second, []tasks.Type{"mail"}, tasks.AllowNewType()))
	cfg := fastConfig(t)
	cfg.PollInterval = 2 * testdb.Patience
	e := executor.MustNew(db, cfg)
	executor.Register(e, "mail", executor.PollerFunc[any, any](doneAtOnce))
	createN(t, db, "mail", 3)
	start(t, e)
	waitDone(t, db, 3)
}

// On Citus, the tasks of a key at its limit do not hold back those of other
// keys: with one task of account "a" running and held, forty more of "a",
// the oldest ready, all in one tree (so on one shard), and eight tasks of
// other accounts on trees of their own, the eight run.
func TestCitusKeyAtItsLimitLetsOtherKeysRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Citus(t)
	require.NoError(t, tasks.SetKeyLimit(ctx, db, "account", 1, []tasks.Type{"charge"}, tasks.AllowNewType()))
	_, err := tasks.Create(ctx, db, tasks.Spec{Type: "charge", State: "held", LimitKey: "a"})
	require.NoError(t, err)
	release := make(chan struct{})
	var held atomic.Bool
	cfg := fastConfig(t)
	cfg.Concurrency = 4
	e := executor.MustNew(db, cfg)
	executor.Register(e, "charge", executor.PollerFunc[string, any](func(ctx context.Context, t *executor.Task[string, any]) (executor.Action, error) {
		if t.State == "held" {
			held.Store(true)
			<-release
		}
		return executor.Done(), nil
	}))
	start(t, e)
	waitFor(t, "the held task of account a", held.Load)

	root := tasks.NewID()
	specs := []tasks.Spec{{ID: root, Type: "tree"}}
	for range 40 {
		specs = append(specs, tasks.Spec{Type: "charge", Parent: root, State: "a", LimitKey: "a"})
	}
	_, err = tasks.CreateMany(ctx, db, specs)
	require.NoError(t, err)
	for i := range 8 {
		_, err := tasks.Create(ctx, db, tasks.Spec{Type: "charge", State: "other", LimitKey: "k" + strconv.Itoa(i)})
		require.NoError(t, err)
	}
	waitFor(t, "the tasks of the other accounts", func() bool {
		var done int
		require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM corotask.tasks WHERE task_type = 'charge' AND limit_key LIKE 'k%' AND outcome = 'done'`).Scan(&done))
		return done == 8
	})
	var a int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM corotask.tasks WHERE limit_key = 'a' AND claim IS NOT NULL`).Scan(&a))
	require.Equal(t, 1, a, "account a runs its held task alone")
	close(release)
	waitDone(t, db, 1+40+8)
}
