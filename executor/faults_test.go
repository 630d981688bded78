package executor_test

// Regression tests for bugs found by the fault harness (internal/faults).

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// logRecorder is a slog handler that keeps every record as text.
type logRecorder struct {
	mu    *sync.Mutex
	lines *[]string
	attrs []slog.Attr
}

func newLogRecorder() *logRecorder {
	return &logRecorder{mu: &sync.Mutex{}, lines: new([]string)}
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	for _, a := range h.attrs {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	h.mu.Lock()
	*h.lines = append(*h.lines, b.String())
	h.mu.Unlock()
	return nil
}

func (h *logRecorder) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logRecorder{mu: h.mu, lines: h.lines, attrs: append(append([]slog.Attr{}, h.attrs...), attrs...)}
}

func (h *logRecorder) WithGroup(string) slog.Handler { return h }

// containing returns the records that contain s.
func (h *logRecorder) containing(s string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, l := range *h.lines {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// namedPool opens a pool whose connections carry application_name name.
func namedPool(t *testing.T, url, name string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["application_name"] = name
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// waitLockWait waits until a backend of application name app is waiting
// for a lock.
func waitLockWait(t *testing.T, admin *pgxpool.Pool, app string) {
	t.Helper()
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, admin.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&n))
		return n > 0
	}, testdb.Patience, 5*time.Millisecond, "waiting for %s to wait for a lock", app)
}

// A poll whose commit finds its connection terminated (pg_terminate_backend,
// a server restart) must be committed on another connection, not recorded as
// a failed poll: a lost connection is not the poll's fault, and with
// MaxFailures it could end the task as failed.
func TestCommitAfterConnectionTerminatedIsRetried(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	admin := testdb.Pool(t, url)
	app := "corotask-test-terminated"
	logs := newLogRecorder()
	cfg := executor.Config{Concurrency: 1, Logger: slog.New(logs)}
	e := executor.MustNew(namedPool(t, url, app), cfg)
	executor.Register(e, "job", executor.PollerFunc[string, int](func(ctx context.Context, t *executor.Task[string, int]) (executor.Action, error) {
		// Kill the executor's connections while it polls, as an operator or a
		// restarting server would; the pool still holds them as idle.
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid, 10000)) FROM pg_stat_activity
			WHERE application_name = $1`, app).Scan(&n); err != nil {
			return executor.Action{}, err
		}
		if n == 0 {
			return executor.Action{}, fmt.Errorf("no connection to terminate")
		}
		t.State = "polled"
		return executor.DoneWith("ok"), nil
	}), executor.MaxFailures(1))
	id, err := tasks.Create(ctx, admin, tasks.Spec{Type: "job"})
	require.NoError(t, err)

	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	task, err := tasks.Get(ctx, admin, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusDone, task.Status, "last error: %s; logs: %v", task.LastError, logs.containing("corotask"))
	require.Zero(t, task.Failures)
	require.JSONEq(t, `"polled"`, string(task.State))
	require.Empty(t, logs.containing("poll failed"))
}

// Two tasks that message each other, committed at once by two executors,
// must not deadlock: each commit locks its own row and its recipients'. The
// first commit is held (by a conflicting insert of its spawned child) after
// it took its locks, so that the second one runs in between, exactly in the
// order that used to deadlock (A locked, B locked, A wants B, B wants A).
func TestCommitsOfTasksThatMessageEachOtherDoNotDeadlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	admin := testdb.Pool(t, url)
	logs := newLogRecorder()
	cfg := executor.Config{Concurrency: 1, Logger: slog.New(logs)}

	ids := []tasks.ID{tasks.NewID(), tasks.NewID()}
	if bytes.Compare(ids[0][:], ids[1][:]) > 0 {
		ids[0], ids[1] = ids[1], ids[0]
	}
	a, b := ids[0], ids[1] // a < b: the order in which locks must be taken
	_, err := tasks.CreateMany(ctx, admin, []tasks.Spec{{ID: a, Type: "x"}, {ID: b, Type: "y"}})
	require.NoError(t, err)

	kid := make(chan tasks.ID, 1)
	blocked := make(chan struct{})
	x := executor.MustNew(namedPool(t, url, "corotask-test-x"), cfg)
	executor.Register(x, "x", executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
		kid <- t.Spawn("kid", nil, nil)
		<-blocked
		t.Send(b, "from a")
		return executor.Suspend(), nil
	}))
	yEntered, yGo := make(chan struct{}), make(chan struct{})
	y := executor.MustNew(namedPool(t, url, "corotask-test-y"), cfg)
	executor.Register(y, "y", executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
		close(yEntered)
		<-yGo
		t.Send(a, "from b")
		return executor.Suspend(), nil
	}))

	// b is being polled by y when a's commit starts.
	yDone := make(chan error, 1)
	go func() { _, err := y.PollOnce(ctx); yDone <- err }()
	<-yEntered

	// A third transaction inserts a's child first, so that a's commit waits
	// on it, its locks taken.
	blocker, err := admin.Begin(ctx)
	require.NoError(t, err)
	defer blocker.Rollback(ctx) //nolint:errcheck
	xDone := make(chan error, 1)
	go func() { _, err := x.PollOnce(ctx); xDone <- err }()
	_, err = blocker.Exec(ctx, `INSERT INTO corotask.tasks (task_id, root_id, task_type) VALUES ($1, $1, 'blocker')`, <-kid)
	require.NoError(t, err)
	close(blocked)
	waitLockWait(t, admin, "corotask-test-x")

	// b's commit starts while a's is held, then a's goes on.
	close(yGo)
	waitLockWait(t, admin, "corotask-test-y")
	require.NoError(t, blocker.Rollback(ctx))
	require.NoError(t, <-xDone)
	require.NoError(t, <-yDone)

	require.Empty(t, logs.containing("40P01"), "a deadlock was detected")
	for _, id := range []tasks.ID{a, b} {
		task, err := tasks.Get(ctx, admin, id)
		require.NoError(t, err)
		require.Zero(t, task.Failures)
		require.Equal(t, 1, task.InboxLen, "the other's message")
	}
}

// A heartbeat renewal never waits for a row another transaction holds (a
// commit in progress): it skips it, keeps the claim, and renews the others,
// so a renewal and a commit that touch the same two tasks cannot deadlock.
func TestRenewalAndCommitDoNotDeadlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	admin := testdb.Pool(t, url)
	logs := newLogRecorder()
	for round := range 4 {
		ids := []tasks.ID{tasks.NewID(), tasks.NewID()}
		if bytes.Compare(ids[0][:], ids[1][:]) > 0 {
			ids[0], ids[1] = ids[1], ids[0]
		}
		a, b := ids[0], ids[1]
		// A type per round: the previous round's b is ready again (it got a
		// message), and must not take a slot of this round's executor.
		typ := tasks.Type(fmt.Sprintf("x%d", round))
		_, err := tasks.CreateMany(ctx, admin, []tasks.Spec{{ID: a, Type: typ}, {ID: b, Type: typ}})
		require.NoError(t, err)

		// An executor runs both tasks; a is committing: it holds a's row and
		// is about to deliver a message to b, whose poll is still running.
		app := fmt.Sprintf("corotask-test-renew-%d", round)
		cfg := executor.Config{Concurrency: 2, HeartbeatTimeout: testdb.LongHeartbeat, HeartbeatInterval: 5 * time.Millisecond,
			PollInterval: time.Hour, DisableListen: true, Logger: slog.New(logs)}
		e := executor.MustNew(namedPool(t, url, app), cfg)
		entered := make(chan tasks.ID, 2)
		release := make(chan struct{})
		executor.Register(e, typ, executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
			entered <- t.ID
			<-release
			return executor.Suspend(), nil
		}))
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- e.Run(runCtx) }()
		<-entered
		<-entered

		committer, err := admin.Begin(ctx)
		require.NoError(t, err)
		defer committer.Rollback(ctx) //nolint:errcheck // a no-op once committed
		_, err = committer.Exec(ctx, `SELECT 1 FROM corotask.tasks WHERE task_id = $1 FOR UPDATE`, a)
		require.NoError(t, err)
		var locked time.Time
		require.NoError(t, admin.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&locked))
		// Renewals go on while a is held: b's heartbeat moves, and nothing
		// waits on a lock.
		require.Eventually(t, func() bool {
			var hb time.Time
			require.NoError(t, admin.QueryRow(ctx, "SELECT heartbeat FROM corotask.tasks WHERE task_id = $1", b).Scan(&hb))
			return hb.After(locked)
		}, testdb.Patience, 5*time.Millisecond, "b's claim is renewed while a is held")
		var waiting int
		require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&waiting))
		require.Zero(t, waiting, "a renewal waits for a lock")
		_, err = committer.Exec(ctx, `SELECT corotask.send_to_task($1, NULL, '1')`, b)
		require.NoError(t, err, "the renewal must not hold b while it waits for a")
		require.NoError(t, committer.Commit(ctx))

		close(release)
		stop()
		require.NoError(t, <-done)
		require.Empty(t, logs.containing("40P01"), "a deadlock was detected")
		require.Empty(t, logs.containing("claim was lost"))
	}
}

// An OnCommit function that fails because the transaction's connection broke
// (not because of what it wrote) must not fail the poll either: the whole
// commit is retried on another connection.
func TestOnCommitOnBrokenConnectionIsRetried(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	logs := newLogRecorder()
	e := executor.MustNew(db, executor.Config{Concurrency: 1, Logger: slog.New(logs)})
	var broke atomic.Bool
	executor.Register(e, "job", executor.PollerFunc[string, int](func(ctx context.Context, t *executor.Task[string, int]) (executor.Action, error) {
		t.State = "polled"
		t.OnCommit(func(ctx context.Context, tx pgx.Tx) error {
			if broke.CompareAndSwap(false, true) {
				// The connection breaks under the commit transaction.
				_ = tx.Conn().PgConn().Close(ctx)
			}
			_, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS public.written (n int); INSERT INTO public.written VALUES (1)`)
			return err
		})
		return executor.DoneWith("ok"), nil
	}), executor.MaxFailures(1))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)

	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.True(t, broke.Load())
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusDone, task.Status, "last error: %s", task.LastError)
	require.Zero(t, task.Failures)
	var written int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM public.written`).Scan(&written))
	require.Equal(t, 1, written, "OnCommit's writes happen exactly once")
}
