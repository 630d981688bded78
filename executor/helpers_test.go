package executor_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
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

// waitDone waits until n tasks are done.
func waitDone(t *testing.T, db tasks.DB, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d tasks done", n), func() bool {
		var done int
		require.NoError(t, db.QueryRow(context.Background(), "SELECT count(*) FROM corotask.tasks WHERE outcome = 'done'").Scan(&done))
		return done == n
	})
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

// createN creates n tasks of type typ in one call, and returns their IDs.
func createN(t testing.TB, db tasks.DB, typ tasks.Type, n int) []tasks.ID {
	t.Helper()
	specs := make([]tasks.Spec, n)
	for i := range specs {
		specs[i] = tasks.Spec{Type: typ}
	}
	ids, err := tasks.CreateMany(context.Background(), db, specs)
	require.NoError(t, err)
	return ids
}

// keyGauge counts the polls running per key (a test's name for what its
// tasks share), and keeps the most it saw of each at once.
type keyGauge struct {
	mu            sync.Mutex
	running, peak map[string]int
}

func newKeyGauge() *keyGauge {
	return &keyGauge{running: map[string]int{}, peak: map[string]int{}}
}

// enter counts a poll of key in; the function it returns counts it out.
func (g *keyGauge) enter(key string) (leave func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.running[key]++
	g.peak[key] = max(g.peak[key], g.running[key])
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.running[key]--
	}
}

// now is how many polls of each key run; most, the most seen at once.
func (g *keyGauge) now() map[string]int  { return g.copy(g.running) }
func (g *keyGauge) most() map[string]int { return g.copy(g.peak) }

func (g *keyGauge) copy(m map[string]int) map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(m)
}
