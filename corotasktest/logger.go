package corotasktest

import (
	"log/slog"
	"testing"

	"github.com/corotask/corotask/internal/testdb"
)

// Logger returns a logger that writes through t.Log, for executor.Config's
// Logger: a failing test shows its executor's logs, apart from those of the
// tests beside it. What is logged after the test has ended is dropped. The
// level is Info; Debug when the environment variable COROTASK_TEST_LOG is
// set.
func Logger(t testing.TB) *slog.Logger {
	return testdb.Logger(t)
}
