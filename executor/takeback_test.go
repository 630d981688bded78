package executor_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

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
