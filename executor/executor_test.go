package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/envelope"
	"github.com/corotask/corotask/internal/testdb"
	_ "github.com/corotask/corotask/internal/testexit" // no race detector pause at exit
	"github.com/corotask/corotask/tasks"
)

// TestMain runs more tests at once than there are CPUs: they spend their time
// waiting for the database and for executors' timers.
func TestMain(m *testing.M) {
	os.Exit(testdb.Main(m, 8))
}

// logger writes the executor's logs through t.Log (Debug and up with
// COROTASK_TEST_LOG set), so that a failing test shows its own.
func logger(t testing.TB) *slog.Logger {
	return testdb.Logger(t)
}

// fastConfig is the tests' executor configuration: quick to find work, and
// with claims that last an hour (renewed at the default pace), so that a
// stall of a loaded machine never makes a claim expire behind a test's back.
// Tests that set HeartbeatTimeout set HeartbeatInterval too.
func fastConfig(t testing.TB) executor.Config {
	return executor.Config{Concurrency: 8, PollInterval: 50 * time.Millisecond, ShutdownTimeout: 5 * time.Second,
		HeartbeatTimeout: testdb.LongHeartbeat, HeartbeatInterval: 10 * time.Second, Logger: logger(t)}
}

// start runs e until the test ends, and returns a function that stops it and
// waits for Run to return.
func start(t *testing.T, e *executor.Executor) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(testdb.Patience):
				t.Errorf("executor did not stop")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// waitFor waits until cond holds, for as long as testdb.Patience.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, testdb.Patience, 10*time.Millisecond, "waiting for %s", what)
}

func waitStatus(t *testing.T, db tasks.DB, id tasks.ID, want tasks.Status) *tasks.Task {
	t.Helper()
	var last *tasks.Task
	waitFor(t, fmt.Sprintf("task %s to be %s", id, want), func() bool {
		task, err := tasks.Get(context.Background(), db, id)
		require.NoError(t, err)
		last = task
		return task.Status == want
	})
	return last
}

type fibState struct {
	N       int
	Started bool
	Waiting int
	Sum     int
}

// fibPoller computes fib(N) with a tree of tasks whose parents wait for
// their children with wait; polls, when not nil, counts the polls.
func fibPoller(wait executor.Action, polls *atomic.Int64) executor.PollerFunc[fibState, int] {
	return func(ctx context.Context, t *executor.Task[fibState, int]) (executor.Action, error) {
		if polls != nil {
			polls.Add(1)
		}
		s := &t.State
		if !s.Started {
			s.Started = true
			if s.N < 2 {
				return executor.DoneWith(s.N), nil
			}
			t.Spawn("fib", fibState{N: s.N - 1}, nil)
			t.Spawn("fib", fibState{N: s.N - 2}, nil)
			s.Waiting = 2
			return wait, nil
		}
		for {
			m, ok := t.Inbox.Pop()
			if !ok {
				break
			}
			if !m.Done || m.Err != "" {
				return executor.Action{}, fmt.Errorf("unexpected message %+v", m)
			}
			s.Sum += m.Body
			s.Waiting--
		}
		if s.Waiting == 0 {
			return executor.DoneWith(s.Sum), nil
		}
		return wait, nil
	}
}

// A fan-out and fan-in across executors committing concurrently, with the
// parents suspended (woken at each completion) or awaiting their children.
// Awaiting, each parent is polled exactly twice: once to spawn, once when
// its last child has ended (a parent woken before would await again, and be
// polled a third time).
func TestFibonacciFanOutFanInAcrossExecutors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		wait executor.Action
	}{{"suspend", executor.Suspend()}, {"await", executor.AwaitChildren()}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			url := testdb.URL(t)
			db := testdb.Pool(t, url)
			var polls atomic.Int64
			poller := fibPoller(c.wait, &polls)
			for range 3 {
				e := executor.MustNew(testdb.Pool(t, url), fastConfig(t))
				executor.Register(e, "fib", poller)
				start(t, e)
			}
			root, err := tasks.Create(ctx, db, tasks.Spec{Type: "fib", State: fibState{N: 12}})
			require.NoError(t, err)
			task := waitStatus(t, db, root, tasks.StatusDone)
			require.JSONEq(t, "144", string(task.Result))

			var count, done int
			require.NoError(t, db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE outcome = 'done') FROM corotask.tasks`).Scan(&count, &done))
			require.Equal(t, 465, count, "fib(12) makes 465 tasks")
			require.Equal(t, count, done)
			if c.name == "await" {
				// 232 parents polled twice, 233 leaves once.
				require.Equal(t, int64(2*232+233), polls.Load())
				var failures int
				require.NoError(t, db.QueryRow(ctx, `SELECT coalesce(sum(failures), 0) FROM corotask.tasks`).Scan(&failures))
				require.Zero(t, failures)
			}
		})
	}
}

func TestMessageSentDuringPollIsSeenByTheNextPoll(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	entered, proceed := make(chan struct{}), make(chan struct{})
	var seen []int
	executor.Register(e, "listener", executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
		t.State++
		seen = append(seen, t.Inbox.Len())
		if t.State == 1 {
			close(entered)
			<-proceed
			return executor.Suspend(), nil
		}
		if m, ok := t.Inbox.Pop(); !ok || m.Body != "during" {
			return executor.Action{}, fmt.Errorf("want the message sent during the first poll, got %+v", m)
		}
		return executor.Done(), nil
	}))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "listener"})
	require.NoError(t, err)

	polled := make(chan error)
	go func() { _, err := e.PollOnce(ctx); polled <- err }()
	<-entered
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, "during"))
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, 0, task.InboxLen)
	require.Equal(t, 1, task.InboxNextLen)
	close(proceed)
	require.NoError(t, <-polled)

	// The poll suspended, but the message that arrived meanwhile makes the
	// task ready at once, with the message moved into its inbox.
	task, err = tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusReady, task.Status)
	require.Equal(t, 1, task.InboxLen)
	require.Equal(t, 0, task.InboxNextLen)

	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []int{0, 1}, seen)
	task, err = tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusDone, task.Status)
	require.Equal(t, 0, task.InboxLen)
}

func TestTwoExecutorsNeverPollOneTaskAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	db := testdb.Pool(t, url)
	var (
		mu       sync.Mutex
		inside   = map[tasks.ID]bool{}
		overlaps int
		polls    atomic.Int64
	)
	poller := executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		mu.Lock()
		if inside[t.ID] {
			overlaps++
		}
		inside[t.ID] = true
		mu.Unlock()
		polls.Add(1)
		defer func() { mu.Lock(); inside[t.ID] = false; mu.Unlock() }()
		t.State++
		if t.State == 15 {
			return executor.Done(), nil
		}
		return executor.Yield(), nil
	})
	for i := 0; i < 2; i++ {
		e := executor.MustNew(testdb.Pool(t, url), fastConfig(t))
		executor.Register(e, "yielder", poller)
		start(t, e)
	}
	specs := make([]tasks.Spec, 20)
	for i := range specs {
		specs[i] = tasks.Spec{Type: "yielder"}
	}
	_, err := tasks.CreateMany(ctx, db, specs)
	require.NoError(t, err)
	waitFor(t, "all tasks done", func() bool {
		var n int
		require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM corotask.tasks WHERE outcome = 'done'`).Scan(&n))
		return n == 20
	})
	mu.Lock()
	defer mu.Unlock()
	require.Zero(t, overlaps)
	require.EqualValues(t, 20*15, polls.Load(), "each poll committed once")
}

func TestStolenClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	db := testdb.Pool(t, url)

	// Executor A renews often, and its claims last an hour: only the test
	// makes A's claim expire (as if A had stalled past it), and B takes the
	// task over.
	cfgA := fastConfig(t)
	cfgA.HeartbeatTimeout, cfgA.HeartbeatInterval = testdb.LongHeartbeat, 200*time.Millisecond
	cfgA.Concurrency = 1 // busy with its one poll: it cannot take the task back itself
	a := executor.MustNew(testdb.Pool(t, url), cfgA)
	aEntered := make(chan struct{})
	aCause := make(chan error, 1)
	executor.Register(a, "job", executor.PollerFunc[string, int](func(ctx context.Context, t *executor.Task[string, int]) (executor.Action, error) {
		t.State = "A"
		close(aEntered)
		<-ctx.Done()
		aCause <- context.Cause(ctx)
		return executor.DoneWith("A"), nil
	}))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job", State: "initial"})
	require.NoError(t, err)
	start(t, a)
	<-aEntered

	cfgB := fastConfig(t)
	b := executor.MustNew(testdb.Pool(t, url), cfgB)
	executor.Register(b, "job", executor.PollerFunc[string, int](func(ctx context.Context, t *executor.Task[string, int]) (executor.Action, error) {
		if t.State != "initial" {
			return executor.Action{}, fmt.Errorf("B sees state %q, want the last committed one", t.State)
		}
		t.State = "B"
		return executor.DoneWith("B"), nil
	}))
	start(t, b)
	expireUntilTakenOver(t, db, id)

	task := waitStatus(t, db, id, tasks.StatusDone)
	require.JSONEq(t, `"B"`, string(task.Result))
	select {
	case cause := <-aCause:
		require.ErrorIs(t, cause, executor.ErrClaimLost)
	case <-time.After(testdb.Patience):
		t.Fatal("A's poll was not canceled")
	}
	// A's outcome was not committed.
	task, err = tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.JSONEq(t, `"B"`, string(task.Result))
	require.JSONEq(t, `"B"`, string(task.State))
}

// expireUntilTakenOver makes the claim task id holds now expire (as if its
// executor had stalled past it), again each time that executor's renewal
// puts it back, until the claim is gone: another executor took the task
// over.
func expireUntilTakenOver(t *testing.T, db *pgxpool.Pool, id tasks.ID) {
	t.Helper()
	ctx := context.Background()
	var claim [16]byte
	require.NoError(t, db.QueryRow(ctx, `SELECT claim FROM corotask.tasks WHERE task_id = $1 AND claim IS NOT NULL`, id).Scan(&claim))
	waitFor(t, "the expired claim to be taken over", func() bool {
		tag, err := db.Exec(ctx, `UPDATE corotask.tasks SET claim_expires_at = now() - interval '1 second'
			WHERE task_id = $1 AND claim = $2`, id, claim)
		require.NoError(t, err)
		return tag.RowsAffected() == 0
	})
}

func TestCommitWithStaleClaimChangesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job", State: "initial", Message: "keep me"})
	require.NoError(t, err)
	// Claimed twice: the first claim's token is stale.
	var first, second string
	require.NoError(t, db.QueryRow(ctx, `UPDATE corotask.tasks SET heartbeat = now(), claim = gen_random_uuid() WHERE task_id = $1 RETURNING claim::text`, id).Scan(&first))
	require.NoError(t, db.QueryRow(ctx, `UPDATE corotask.tasks SET heartbeat = now(), claim = gen_random_uuid() WHERE task_id = $1 RETURNING claim::text`, id).Scan(&second))
	child := tasks.NewID()
	rows, err := db.Query(ctx, `SELECT corotask.commit_polls(ARRAY[$1::uuid], ARRAY[$2::uuid], ARRAY['"A"'::jsonb], ARRAY[1], ARRAY['done'],
		ARRAY[NULL::float8], ARRAY[NULL::timestamptz], ARRAY['"A"'::jsonb],
		ARRAY[jsonb_build_object('spawn', jsonb_build_array(jsonb_build_object('id', $3::uuid, 'type', 'kid')))],
		ARRAY[1::smallint], 20, 100, ARRAY[NULL::uuid], NULL, NULL, ARRAY[NULL::bigint], ARRAY[NULL::bigint])`, id, first, child)
	require.NoError(t, err)
	require.False(t, rows.Next(), "nothing committed")
	rows.Close()
	require.NoError(t, rows.Err())
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusRunning, task.Status)
	require.JSONEq(t, `"initial"`, string(task.State))
	require.Equal(t, 1, task.InboxLen)
	_, err = tasks.Get(ctx, db, child)
	require.ErrorIs(t, err, tasks.ErrNotFound)

	var lost, ended bool
	require.NoError(t, db.QueryRow(ctx, `SELECT claim_lost, ended FROM corotask.fail_poll($1, $2::uuid, 'x', '1s', 0, 'failed', '', 1::smallint, 20, 100)`, id, first).Scan(&lost, &ended))
	require.True(t, lost)
	task, err = tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Zero(t, task.Failures)
}

type counterState struct{ Count int }

func failingPoller(mode string) executor.PollerFunc[counterState, string] {
	return func(ctx context.Context, t *executor.Task[counterState, string]) (executor.Action, error) {
		t.State.Count = 99
		t.Inbox.Pop()
		t.Spawn("child", nil, nil)
		t.Send(t.ID, "to myself")
		if mode == "panic" {
			panic("boom")
		}
		return executor.Action{}, errors.New("poll failed on purpose")
	}
}

func TestErrorAndPanicBackOffAndKeepStateAndMessages(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"error", "panic"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := testdb.New(t)
			cfg := fastConfig(t)
			cfg.BackoffMin, cfg.BackoffMax = time.Hour, time.Hour
			e := executor.MustNew(db, cfg)
			executor.Register(e, "flaky", failingPoller(mode))
			id, err := tasks.Create(ctx, db, tasks.Spec{Type: "flaky", State: counterState{Count: 1}, Message: "m1"})
			require.NoError(t, err)

			n, err := e.PollOnce(ctx)
			require.Equal(t, 1, n)
			require.Error(t, err)
			if mode == "panic" {
				var p *executor.PanicError
				require.ErrorAs(t, err, &p)
				require.Contains(t, string(p.Stack), "failingPoller")
			}
			task, err := tasks.Get(ctx, db, id)
			require.NoError(t, err)
			require.Equal(t, tasks.StatusRetrying, task.Status)
			require.JSONEq(t, `{"Count":1}`, string(task.State))
			require.Equal(t, 1, task.InboxLen, "the popped message is still there")
			require.Equal(t, 1, task.Failures)
			if mode == "panic" {
				require.Contains(t, task.LastError, "poller panicked: boom")
			} else {
				require.Equal(t, "poll failed on purpose", task.LastError)
			}
			require.True(t, task.WakeAt.After(time.Now().Add(20*time.Minute)), "backed off: %s", task.WakeAt)
			require.True(t, task.WakeAt.Before(time.Now().Add(61*time.Minute)))
			kids, err := tasks.List(ctx, db, tasks.Filter{Parent: id})
			require.NoError(t, err)
			require.Empty(t, kids, "no effect of the failed poll is kept")
		})
	}
}

func TestSuccessResetsFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	cfg := fastConfig(t)
	cfg.BackoffMin = time.Millisecond
	e := executor.MustNew(db, cfg)
	executor.Register(e, "flaky", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		if t.Failures < 2 {
			return executor.Action{}, fmt.Errorf("failure %d", t.Failures+1)
		}
		t.State = t.Failures
		return executor.Suspend(), nil
	}))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "flaky"})
	require.NoError(t, err)
	waitFor(t, "three polls", func() bool {
		_, _ = e.PollOnce(ctx)
		task, err := tasks.Get(ctx, db, id)
		require.NoError(t, err)
		return task.Status == tasks.StatusSuspended
	})
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Zero(t, task.Failures)
	require.Empty(t, task.LastError)
	require.JSONEq(t, "2", string(task.State))
}

func TestMaxFailuresEndsTaskAndTellsParent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	cfg := fastConfig(t)
	cfg.BackoffMin = time.Millisecond
	e := executor.MustNew(db, cfg)
	executor.Register(e, "flaky", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.Action{}, errors.New("always fails")
	}), executor.MaxFailures(3))
	parent, err := tasks.Create(ctx, db, tasks.Spec{Type: "parent", WakeAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	child, err := tasks.Create(ctx, db, tasks.Spec{Type: "flaky", Parent: parent})
	require.NoError(t, err)
	waitFor(t, "the child to fail", func() bool {
		_, _ = e.PollOnce(ctx)
		task, err := tasks.Get(ctx, db, child)
		require.NoError(t, err)
		return task.Status == tasks.StatusFailed
	})
	task, err := tasks.Get(ctx, db, child)
	require.NoError(t, err)
	require.Equal(t, 3, task.Failures)
	require.NotNil(t, task.DoneAt)

	p, err := tasks.Get(ctx, db, parent)
	require.NoError(t, err)
	require.Len(t, p.Inbox, 1)
	m := envelope.Decode[json.RawMessage](parent, [][]byte{p.Inbox[0]})[0]
	require.Equal(t, child, m.From)
	require.True(t, m.Done)
	require.Equal(t, "always fails", m.Err)
	require.Equal(t, tasks.StatusReady, p.Status, "the completion woke the parent")
}

func TestCancelRunningTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	entered := make(chan struct{})
	cause := make(chan error, 1)
	executor.Register(e, "long", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		close(entered)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return executor.Yield(), nil
	}))
	parent, err := tasks.Create(ctx, db, tasks.Spec{Type: "parent", WakeAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "long", Parent: parent})
	require.NoError(t, err)
	start(t, e)
	<-entered
	require.NoError(t, tasks.Cancel(ctx, db, id))
	select {
	case c := <-cause:
		require.ErrorIs(t, c, executor.ErrCanceled)
	case <-time.After(testdb.Patience):
		t.Fatal("the poll of a canceled task was not canceled")
	}
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusCanceled, task.Status)
	p, err := tasks.Get(ctx, db, parent)
	require.NoError(t, err)
	require.Equal(t, 1, p.InboxLen)
}

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

func TestExecutorSurvivesKilledConnections(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	admin := testdb.Pool(t, url)
	e := executor.MustNew(testdb.Pool(t, url), fastConfig(t))
	executor.Register(e, "job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.Done(), nil
	}))
	start(t, e)

	first, err := tasks.Create(ctx, admin, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	waitStatus(t, admin, first, tasks.StatusDone)

	var killed int
	require.NoError(t, admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&killed))
	require.Positive(t, killed)

	var ids []tasks.ID
	for i := 0; i < 5; i++ {
		id, err := tasks.Create(ctx, admin, tasks.Spec{Type: "job"})
		require.NoError(t, err)
		ids = append(ids, id)
	}
	for _, id := range ids {
		waitStatus(t, admin, id, tasks.StatusDone)
	}
}

// gauge counts the polls running at once and keeps the most it saw.
type gauge struct{ cur, peak atomic.Int64 }

// enter counts a poll in; the poll calls leave when it returns.
func (g *gauge) enter() (leave func()) {
	n := g.cur.Add(1)
	for {
		p := g.peak.Load()
		if n <= p || g.peak.CompareAndSwap(p, n) {
			break
		}
	}
	return func() { g.cur.Add(-1) }
}

// runTasks creates n tasks of typ, runs e, and waits until all are done.
// during runs once e has started, before the wait.
func runTasks(t *testing.T, db *pgxpool.Pool, e *executor.Executor, typ tasks.Type, n int, during func()) {
	t.Helper()
	ctx := context.Background()
	specs := make([]tasks.Spec, n)
	for i := range specs {
		specs[i] = tasks.Spec{Type: typ}
	}
	_, err := tasks.CreateMany(ctx, db, specs)
	require.NoError(t, err)
	start(t, e)
	during()
	waitFor(t, "all done", func() bool {
		list, err := tasks.List(ctx, db, tasks.Filter{Status: tasks.StatusDone, Limit: n + 1})
		require.NoError(t, err)
		return len(list) == n
	})
}

func TestConcurrencyLimitPerType(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	var g gauge
	executor.Register(e, "limited", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		defer g.enter()()
		return executor.Done(), nil
	}), executor.MaxConcurrency(2))
	runTasks(t, db, e, "limited", 30, func() {})
	require.LessOrEqual(t, g.peak.Load(), int64(2))
}

// TestConcurrencyLimit: no more than Config.Concurrency polls run at once,
// although the executor claims more while finished polls commit.
func TestConcurrencyLimit(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	cfg := fastConfig(t)
	cfg.Concurrency = 3
	e := executor.MustNew(db, cfg)
	var g gauge
	gate := make(chan struct{})
	executor.Register(e, "gated", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		defer g.enter()()
		<-gate
		return executor.Done(), nil
	}))
	runTasks(t, db, e, "gated", 30, func() {
		waitFor(t, "every slot busy", func() bool { return g.cur.Load() == 3 })
		close(gate)
	})
	require.Equal(t, int64(3), g.peak.Load())
}

// TestCommittingPollFreesItsSlot: a poll that returned no longer holds its
// slot while its outcome commits, so a slow commit does not stall the
// executor.
func TestCommittingPollFreesItsSlot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	cfg := fastConfig(t)
	cfg.Concurrency = 1
	e := executor.MustNew(db, cfg)
	polling, locked := make(chan struct{}), make(chan struct{})
	executor.Register(e, "slow", executor.PollerFunc[int, int](func(context.Context, *executor.Task[int, int]) (executor.Action, error) {
		close(polling)
		<-locked
		return executor.Done(), nil
	}))
	executor.Register(e, "quick", executor.PollerFunc[int, int](func(context.Context, *executor.Task[int, int]) (executor.Action, error) {
		return executor.Done(), nil
	}))
	slow, err := tasks.Create(ctx, db, tasks.Spec{Type: "slow"})
	require.NoError(t, err)
	start(t, e)
	<-polling
	// Hold the slow task's row lock, so that its commit waits.
	tx, err := db.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	_, err = tx.Exec(ctx, "SELECT 1 FROM corotask.tasks WHERE task_id = $1 FOR UPDATE", slow)
	require.NoError(t, err)
	quick, err := tasks.Create(ctx, db, tasks.Spec{Type: "quick"})
	require.NoError(t, err)
	close(locked)
	waitStatus(t, db, quick, tasks.StatusDone)
	task, err := tasks.Get(ctx, db, slow)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusRunning, task.Status, "the slow task's commit waits on the lock")
	require.NoError(t, tx.Rollback(ctx))
	waitStatus(t, db, slow, tasks.StatusDone)
}

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

func TestRetentionDeletesExpiredTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	cfg := fastConfig(t)
	cfg.Retention = time.Hour
	e := executor.MustNew(db, cfg)
	old, err := tasks.Create(ctx, db, tasks.Spec{Type: "a"})
	require.NoError(t, err)
	recent, err := tasks.Create(ctx, db, tasks.Spec{Type: "a"})
	require.NoError(t, err)
	alive, err := tasks.Create(ctx, db, tasks.Spec{Type: "a"})
	require.NoError(t, err)
	require.NoError(t, tasks.Cancel(ctx, db, old))
	require.NoError(t, tasks.Cancel(ctx, db, recent))
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET done_at = now() - interval '2 hours' WHERE task_id = $1`, old)
	require.NoError(t, err)
	n, err := e.DeleteExpired(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = tasks.Get(ctx, db, old)
	require.ErrorIs(t, err, tasks.ErrNotFound)
	for _, id := range []tasks.ID{recent, alive} {
		_, err = tasks.Get(ctx, db, id)
		require.NoError(t, err)
	}
}
