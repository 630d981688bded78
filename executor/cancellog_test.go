package executor_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// lineRecorder is a slog handler that keeps the records at Info and above,
// and passes them on to next.
type lineRecorder struct {
	next    slog.Handler
	mu      *sync.Mutex
	records *[]slog.Record
}

func newLineRecorder(next slog.Handler) *lineRecorder {
	return &lineRecorder{next: next, mu: &sync.Mutex{}, records: new([]slog.Record)}
}

func (h *lineRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h *lineRecorder) Handle(ctx context.Context, r slog.Record) error {
	h.mu.Lock()
	*h.records = append(*h.records, r.Clone())
	h.mu.Unlock()
	return h.next.Handle(ctx, r)
}

func (h *lineRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	return &lineRecorder{next: h.next.WithAttrs(as), mu: h.mu, records: h.records}
}

func (h *lineRecorder) WithGroup(g string) slog.Handler {
	return &lineRecorder{next: h.next.WithGroup(g), mu: h.mu, records: h.records}
}

// matching returns the records whose message contains s.
func (h *lineRecorder) matching(s string) []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []slog.Record
	for _, r := range *h.records {
		if strings.Contains(r.Message, s) {
			out = append(out, r)
		}
	}
	return out
}

// An operator's cancel of a running tree logs one Info line for the polls
// it stopped (or a few, when they stop over more than a moment), naming how
// many, not one warning per poll.
func TestCancelOfARunningTreeLogsOneLine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	rec := newLineRecorder(logger(t).Handler())
	cfg := fastConfig(t)
	cfg.Concurrency, cfg.Logger = 64, slog.New(rec)
	e := executor.MustNew(db, cfg)
	const children = 30
	var running, returned atomic.Int32
	executor.Register(e, "child", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		running.Add(1)
		<-ctx.Done()
		returned.Add(1)
		return executor.Done(), nil
	}))
	root, err := tasks.Create(ctx, db, tasks.Spec{Type: "root"}) // polled by no one: it stays
	require.NoError(t, err)
	for range children {
		_, err := tasks.Create(ctx, db, tasks.Spec{Type: "child", Parent: root})
		require.NoError(t, err)
	}
	stop := start(t, e)
	waitFor(t, "every child to be polled", func() bool { return running.Load() == children })
	require.NoError(t, tasks.Cancel(ctx, db, root))
	waitFor(t, "every poll to stop", func() bool { return returned.Load() == children })
	stop() // logs what is still gathered

	require.Empty(t, rec.matching("claim was lost"), "no line per poll")
	require.Empty(t, rec.matching("canceled while polled"), "no line per poll")
	lines := rec.matching("stopped: their tasks were canceled")
	require.NotEmpty(t, lines)
	require.Less(t, len(lines), children, "polls stopped by one cancel share their lines")
	total := 0
	for _, r := range lines {
		require.Equal(t, slog.LevelInfo, r.Level)
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "polls" {
				total += int(a.Value.Int64())
			}
			return true
		})
	}
	require.Equal(t, children, total)
}
