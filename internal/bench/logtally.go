package bench

import (
	"cmp"
	"context"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
)

// logEchoed is how many records of each level and message a logTally
// passes on: an executor under pressure logs the same warning thousands of
// times, and the count says more than the lines.
const logEchoed = 3

// logTally is the executors' slog.Handler in the scenarios: it counts the
// records of each level and message (info and above), and prints the first
// logEchoed of each warning or error as text.
type logTally struct {
	out   slog.Handler
	tally *tally
}

type tally struct {
	mu sync.Mutex
	n  map[string]int64
}

func newLogTally(w io.Writer) *logTally {
	return &logTally{out: slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}), tally: &tally{n: map[string]int64{}}}
}

func (h *logTally) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h *logTally) Handle(ctx context.Context, r slog.Record) error {
	key := r.Level.String() + " " + r.Message
	h.tally.mu.Lock()
	h.tally.n[key]++
	n := h.tally.n[key]
	h.tally.mu.Unlock()
	if r.Level < slog.LevelWarn || n > logEchoed {
		return nil
	}
	if n == logEchoed {
		r = r.Clone()
		r.AddAttrs(slog.String("bench", "further records of this message are counted, not printed"))
	}
	return h.out.Handle(ctx, r)
}

func (h *logTally) WithAttrs(as []slog.Attr) slog.Handler {
	return &logTally{out: h.out.WithAttrs(as), tally: h.tally}
}

func (h *logTally) WithGroup(name string) slog.Handler {
	return &logTally{out: h.out.WithGroup(name), tally: h.tally}
}

// counts returns a copy of the counts so far, by "LEVEL message".
func (h *logTally) counts() map[string]int64 {
	h.tally.mu.Lock()
	defer h.tally.mu.Unlock()
	return maps.Clone(h.tally.n)
}

// addLogCounts adds up logs (counts by "LEVEL message", from every
// executor) into res: the number of warnings and errors, and a note per
// message, most frequent first.
func addLogCounts(res *Result, logs map[string]int64) {
	var warns, errs int64
	for k, n := range logs {
		switch {
		case strings.HasPrefix(k, "WARN "):
			warns += n
		case strings.HasPrefix(k, "ERROR "):
			errs += n
		}
	}
	res.metric("executor_log_warnings", warns)
	res.metric("executor_log_errors", errs)
	keys := slices.SortedFunc(maps.Keys(logs), func(a, b string) int {
		return cmp.Or(cmp.Compare(logs[b], logs[a]), cmp.Compare(a, b))
	})
	for _, k := range keys {
		res.note("executor log: %d × %s", logs[k], k)
	}
}
