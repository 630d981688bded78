package testdb

import (
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
)

// Logger returns a logger that writes through t.Log, so that a failing test
// shows its own logs, apart from those of the tests running beside it. What
// is logged after the test has ended (by a goroutine that outlived it) is
// dropped rather than reported. The level is Info; Debug when
// COROTASK_TEST_LOG is set.
func Logger(t testing.TB) *slog.Logger {
	w := &testWriter{t: t}
	// Cleanups run last registered first: those the test registers after
	// this one (stopping an executor, say) may still log.
	t.Cleanup(w.stop)
	level := slog.LevelInfo
	if os.Getenv("COROTASK_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// testWriter writes each log record through t.Log until stop.
type testWriter struct {
	mu      sync.Mutex
	t       testing.TB
	stopped bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
}
