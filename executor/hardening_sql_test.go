package executor_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// takeoverText is what last_error says after a claim was taken over.
const takeoverText = "stopped renewing its claim (crashed, killed or stalled)"

// An executor judges another's claim by the expiry that executor set, not by
// its own HeartbeatTimeout: one with a short timeout does not take a task
// from one with a long timeout whose claim is still fresh.
func TestMixedHeartbeatTimeoutsAgree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	db := testdb.Pool(t, url)

	// A's claim lasts an hour, and A does not renew it while the test runs:
	// its heartbeat only ages.
	cfgA := fastConfig(t)
	cfgA.HeartbeatTimeout, cfgA.HeartbeatInterval = testdb.LongHeartbeat, 20*time.Minute
	a := executor.MustNew(testdb.Pool(t, url), cfgA)
	entered, release := make(chan struct{}), make(chan struct{})
	executor.Register(a, "job", executor.PollerFunc[string, int](func(ctx context.Context, t *executor.Task[string, int]) (executor.Action, error) {
		close(entered)
		<-release
		return executor.DoneWith("A"), nil
	}))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	start(t, a)
	<-entered

	const bTimeout = 300 * time.Millisecond
	waitFor(t, "A's heartbeat to look stale to B's own timeout", func() bool {
		var old bool
		require.NoError(t, db.QueryRow(ctx, `SELECT heartbeat < now() - make_interval(secs => $2) FROM corotask.tasks WHERE task_id = $1`,
			id, bTimeout.Seconds()).Scan(&old))
		return old
	})
	recB := newRecorder()
	cfgB := fastConfig(t)
	cfgB.HeartbeatTimeout, cfgB.HeartbeatInterval = bTimeout, bTimeout/3
	cfgB.Hooks = recB
	b := executor.MustNew(testdb.Pool(t, url), cfgB)
	var bPolls atomic.Int32
	executor.Register(b, "job", executor.PollerFunc[string, int](func(ctx context.Context, t *executor.Task[string, int]) (executor.Action, error) {
		bPolls.Add(1)
		return executor.DoneWith("B"), nil
	}))
	start(t, b)
	// B looks for stale claims several times: it must not take the task over.
	waitFor(t, "B's searches for stale claims", func() bool { return recB.staleSearches() >= 5 })
	require.Zero(t, bPolls.Load())
	close(release)
	task := waitStatus(t, db, id, tasks.StatusDone)
	require.JSONEq(t, `"A"`, string(task.Result))
	require.Zero(t, bPolls.Load())
}

// A poll that crashes its executor is counted: taking over an expired claim
// counts an attempt, and past MaxFailures the task fails, unpolled, with a
// last_error that says why, and its parent is told.
func TestTakeoverOfAnExpiredClaimCountsAnAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	parent, err := tasks.Create(ctx, db, tasks.Spec{Type: "parent", WakeAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	child, err := tasks.Create(ctx, db, tasks.Spec{Type: "job", Parent: parent})
	require.NoError(t, err)

	// Each executor polls with PollOnce, which renews no claim: a poll that
	// never returns is, to the database, an executor that crashed once its
	// claim expires. The claims last an hour; the test expires each.
	release := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(release); wg.Wait() })
	entered := make(chan struct{}, 10)
	newExecutor := func() *executor.Executor {
		e := executor.MustNew(db, fastConfig(t))
		executor.Register(e, "job", executor.PollerFunc[int, json.RawMessage](func(ctx context.Context, t *executor.Task[int, json.RawMessage]) (executor.Action, error) {
			entered <- struct{}{}
			<-release
			return executor.Done(), nil
		}), executor.MaxFailures(3))
		return e
	}
	expire := func() {
		tag, err := db.Exec(ctx, `UPDATE corotask.tasks SET claim_expires_at = now() - interval '1 second'
			WHERE task_id = $1 AND claim_expires_at > now()`, child)
		require.NoError(t, err)
		require.EqualValues(t, 1, tag.RowsAffected(), "the claim was valid")
	}
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = newExecutor().PollOnce(context.Background())
		}()
		<-entered
		task, err := tasks.Get(ctx, db, child)
		require.NoError(t, err)
		require.Equal(t, tasks.StatusRunning, task.Status)
		require.Equal(t, i, task.Failures, "takeovers so far")
		expire()
	}
	// The third takeover reaches MaxFailures: the task fails without a poll.
	n, err := newExecutor().PollOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Empty(t, entered)
	task, err := tasks.Get(ctx, db, child)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusFailed, task.Status)
	require.Equal(t, 3, task.Failures)
	require.Contains(t, task.LastError, takeoverText)

	p, err := tasks.Get(ctx, db, parent)
	require.NoError(t, err)
	require.Len(t, p.Inbox, 1)
	var m struct {
		From string `json:"from"`
		Done bool   `json:"done"`
		Err  string `json:"err"`
	}
	require.NoError(t, json.Unmarshal(p.Inbox[0], &m))
	require.True(t, m.Done)
	require.Equal(t, child.UUID(), m.From)
	require.Contains(t, m.Err, takeoverText)
}

// MaxConcurrency bounds what one claim takes of a type, expired claims and
// ready tasks together.
func TestMaxConcurrencyHoldsForExpiredClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	specs := make([]tasks.Spec, 7)
	for i := range specs {
		specs[i] = tasks.Spec{Type: "capped"}
	}
	ids, err := tasks.CreateMany(ctx, db, specs)
	require.NoError(t, err)
	// Five of them were claimed by an executor that died.
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET heartbeat = now() - interval '1 minute', claim = gen_random_uuid(),
		claim_expires_at = now() - interval '30 seconds' WHERE task_id = ANY($1)`, ids[:5])
	require.NoError(t, err)

	e := executor.MustNew(db, fastConfig(t))
	var polls atomic.Int32
	executor.Register(e, "capped", executor.PollerFunc[int, json.RawMessage](func(ctx context.Context, t *executor.Task[int, json.RawMessage]) (executor.Action, error) {
		polls.Add(1)
		return executor.Done(), nil
	}), executor.MaxConcurrency(2))
	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.EqualValues(t, 2, polls.Load())
	var running int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM corotask.tasks WHERE claim IS NOT NULL`).Scan(&running))
	require.Equal(t, 3, running, "the expired claims not taken are left for later")
}

// Retention keeps an ended task's record while it has children, so that a
// cancel reaches every live descendant.
func TestRetentionKeepsParentsOfLiveTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	root, err := tasks.Create(ctx, db, tasks.Spec{Type: "root"})
	require.NoError(t, err)
	child, err := tasks.Create(ctx, db, tasks.Spec{Type: "child", Parent: root})
	require.NoError(t, err)
	grandchild, err := tasks.Create(ctx, db, tasks.Spec{Type: "grandchild", Parent: child})
	require.NoError(t, err)
	// The child ended long ago; the grandchild lives on.
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET done_at = now() - interval '1 day', outcome = 'done', wake_at = NULL
		WHERE task_id = $1`, child)
	require.NoError(t, err)

	cfg := fastConfig(t)
	cfg.Retention = time.Hour
	e := executor.MustNew(db, cfg)
	n, err := e.DeleteExpired(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	_, err = tasks.Get(ctx, db, child)
	require.NoError(t, err)

	require.NoError(t, tasks.Cancel(ctx, db, root))
	g, err := tasks.Get(ctx, db, grandchild)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusCanceled, g.Status)

	// Once its descendants have ended and expired, the leaves go first, then
	// their parents, in one call.
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET done_at = now() - interval '1 day'`)
	require.NoError(t, err)
	n, err = e.DeleteExpired(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n)
}

// A message to a task waiting out the backoff of a failed poll does not
// wake it early; the retry sees every message.
func TestMessagesDoNotCutBackoffShort(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	cfg := fastConfig(t)
	cfg.BackoffMin = time.Hour
	cfg.BackoffMax = 2 * time.Hour
	e := executor.MustNew(db, cfg)
	var seen []string
	fail := true
	executor.Register(e, "job", executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
		if fail {
			fail = false
			return executor.Action{}, errBoom
		}
		for {
			m, ok := t.Inbox.Pop()
			if !ok {
				break
			}
			seen = append(seen, m.Body)
		}
		return executor.Suspend(), nil
	}))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job", Message: "first"})
	require.NoError(t, err)
	_, err = e.PollOnce(ctx)
	require.ErrorIs(t, err, errBoom)
	before, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusRetrying, before.Status)

	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, "second"))
	after, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusRetrying, after.Status, "a message does not end the backoff")
	require.Equal(t, before.WakeAt, after.WakeAt)
	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n)

	// The backoff over, the retry sees both messages.
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET wake_at = now() WHERE task_id = $1`, id)
	require.NoError(t, err)
	n, err = e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []string{"first", "second"}, seen)
}

var errBoom = boomError{}

type boomError struct{}

func (boomError) Error() string { return "boom" }

// countingHandler counts log records whose message contains a text.
type countingHandler struct {
	slog.Handler
	text string
	n    *atomic.Int32
}

func (h countingHandler) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.text) {
		h.n.Add(1)
	}
	return h.Handler.Handle(ctx, r)
}

func (h countingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return countingHandler{h.Handler.WithAttrs(as), h.text, h.n}
}

func (h countingHandler) WithGroup(g string) slog.Handler {
	return countingHandler{h.Handler.WithGroup(g), h.text, h.n}
}

// An executor does not take back a task it is still polling (the old poll
// lost its claim but ignores its context): it leaves it out of its search for
// expired claims until that poll returns, rather than claiming it, giving it
// back and claiming it again in a loop. Once the poll returns, the task is
// taken over and polled again.
func TestTakeBackIsNotAStorm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	var takeBacks atomic.Int32
	cfg := fastConfig(t)
	cfg.PollInterval = 50 * time.Millisecond
	cfg.Logger = slog.New(countingHandler{logger(t).Handler(), "took back a task", &takeBacks})
	rec := newRecorder()
	cfg.Hooks = rec
	e := executor.MustNew(db, cfg)
	entered, release := make(chan struct{}), make(chan struct{})
	var polls atomic.Int32
	executor.Register(e, "job", executor.PollerFunc[int, json.RawMessage](func(ctx context.Context, t *executor.Task[int, json.RawMessage]) (executor.Action, error) {
		if polls.Add(1) == 1 {
			close(entered)
			<-release // ignores its context
		}
		return executor.Done(), nil
	}))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	start(t, e)
	<-entered
	// The poll's claim is lost, and the claim that replaced it expired.
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET claim = gen_random_uuid(), claim_expires_at = now() - interval '1 second'
		WHERE task_id = $1`, id)
	require.NoError(t, err)
	before, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	// Many searches for expired claims (one per PollInterval) while the old
	// poll runs on: none takes the task.
	searched := rec.staleSearches()
	waitFor(t, "searches for expired claims", func() bool { return rec.staleSearches() >= searched+30 })
	after, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Zero(t, takeBacks.Load())
	require.Equal(t, before.Attempts, after.Attempts, "not claimed again while polled here")
	require.Equal(t, int32(1), polls.Load())

	close(release)
	waitStatus(t, db, id, tasks.StatusDone)
	require.Equal(t, int32(2), polls.Load(), "polled again once the old poll returned")
}

// A task claimed again right after its poll committed (it yields, so it is
// ready at once), while the poll's goroutine is still forgetting it, is
// polled: it is not mistaken for a stale claim of this executor and given
// back for a PollInterval.
func TestReclaimRightAfterCommitIsNotATakeBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	var takeBacks atomic.Int32
	cfg := fastConfig(t)
	cfg.PollInterval = time.Hour // a task given back would not be polled again in time
	cfg.Logger = slog.New(countingHandler{logger(t).Handler(), "took back a task", &takeBacks})
	e := executor.MustNew(db, cfg)
	const polls = 100
	executor.Register(e, "yielder", executor.PollerFunc[int, json.RawMessage](func(ctx context.Context, t *executor.Task[int, json.RawMessage]) (executor.Action, error) {
		if t.State++; t.State == polls {
			return executor.Done(), nil
		}
		return executor.Yield(), nil
	}))
	ids := make([]tasks.ID, 4)
	for i := range ids {
		id, err := tasks.Create(ctx, db, tasks.Spec{Type: "yielder"})
		require.NoError(t, err)
		ids[i] = id
	}
	start(t, e)
	for _, id := range ids {
		waitStatus(t, db, id, tasks.StatusDone)
	}
	require.Zero(t, takeBacks.Load())
}

// A poll that returns Done while messages arrived for its task does not end
// it: the poll's state and sends are committed, and the task is polled again
// with the new messages; it ends when a Done poll saw everything.
func TestDoneWithMessagesArrivedMeanwhilePollsAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	parent, err := tasks.Create(ctx, db, tasks.Spec{Type: "parent", WakeAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	other, err := tasks.Create(ctx, db, tasks.Spec{Type: "other", WakeAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job", Parent: parent, Message: "first"})
	require.NoError(t, err)

	e := executor.MustNew(db, fastConfig(t))
	entered, proceed := make(chan struct{}), make(chan struct{})
	var seen [][]string // the messages each poll saw
	var onCommits int
	executor.Register(e, "job", executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
		var got []string
		for {
			m, ok := t.Inbox.Pop()
			if !ok {
				break
			}
			got = append(got, m.Body)
		}
		seen = append(seen, got)
		t.State++
		t.Send(other, "hello")
		t.OnCommit(func(context.Context, pgx.Tx) error { onCommits++; return nil })
		if len(seen) == 1 {
			close(entered)
			<-proceed
		}
		return executor.DoneWith(t.State), nil
	}))
	polled := make(chan error, 1)
	go func() {
		_, err := e.PollOnce(context.Background())
		polled <- err
	}()
	<-entered
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, "during"))
	close(proceed)
	require.NoError(t, <-polled)

	// The Done poll is superseded: nothing of it is kept.
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusReady, task.Status, "not ended: a message arrived during the Done poll")
	require.Empty(t, task.State, "the state is as before the poll (none)")
	require.Equal(t, 2, task.InboxLen, "the popped message is back, followed by the new one")
	o, err := tasks.Get(ctx, db, other)
	require.NoError(t, err)
	require.Zero(t, o.InboxLen, "the poll's sends are dropped with it")
	require.Zero(t, onCommits, "and its OnCommit work")
	p, err := tasks.Get(ctx, db, parent)
	require.NoError(t, err)
	require.Zero(t, p.InboxLen, "the parent is not told")
	h, err := tasks.History(ctx, db, id, tasks.HistoryOptions{})
	require.NoError(t, err)
	require.Equal(t, tasks.Superseded, h[len(h)-1].Outcome)

	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, [][]string{{"first"}, {"first", "during"}}, seen)
	task, err = tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusDone, task.Status)
	require.JSONEq(t, "1", string(task.Result), "the state the superseded poll counted was not kept")
	o, err = tasks.Get(ctx, db, other)
	require.NoError(t, err)
	require.Equal(t, 1, o.InboxLen, "the ending poll's send, once")
	require.Equal(t, 1, onCommits)
	p, err = tasks.Get(ctx, db, parent)
	require.NoError(t, err)
	require.Equal(t, 1, p.InboxLen, "one completion")
}
