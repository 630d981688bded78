package executor_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// warnings records the messages an executor logs at Warn and above, and
// passes every record on to the test's log.
type warnings struct {
	slog.Handler
	mu   *sync.Mutex
	msgs *[]string
}

func (w warnings) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		w.mu.Lock()
		*w.msgs = append(*w.msgs, r.Message)
		w.mu.Unlock()
	}
	return w.Handler.Handle(ctx, r)
}

func (w warnings) WithAttrs(as []slog.Attr) slog.Handler {
	return warnings{w.Handler.WithAttrs(as), w.mu, w.msgs}
}

func (w warnings) WithGroup(name string) slog.Handler {
	return warnings{w.Handler.WithGroup(name), w.mu, w.msgs}
}

func (w warnings) seen() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), *w.msgs...)
}

// An executor whose every connection is killed between tasks (an
// idle-session killer, a failover, a pooler's restart) goes on at once on new
// ones: its claims, commits and LISTEN retry at once rather than back off,
// and no task is polled twice or counted as failed.
func TestConnectionsKilledAreReplacedAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	// The test's own connection, which the kills spare.
	admin, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer admin.Close(ctx)

	w := warnings{Handler: logger(t).Handler(), mu: &sync.Mutex{}, msgs: &[]string{}}
	cfg := fastConfig(t)
	cfg.Logger = slog.New(w)
	e := executor.New(testdb.Pool(t, url), cfg)
	executor.Register(e, "job", executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
		return executor.Done(), nil
	}))
	defer start(t, e)()

	const rounds, perRound = 4, 20
	for round := range rounds {
		specs := make([]tasks.Spec, perRound)
		for i := range specs {
			specs[i] = tasks.Spec{Type: "job", State: round}
		}
		_, err := tasks.CreateMany(ctx, admin, specs)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			var left int
			require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM corotask.tasks WHERE done_at IS NULL`).Scan(&left))
			return left == 0
		}, testdb.Patience, 5*time.Millisecond, "round %d's tasks were not all done", round)
		// Every other backend of the database: the executor's pool, its
		// LISTEN connection and its heartbeat connection.
		var killed int
		require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, $1))
			FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`,
			testdb.Patience.Milliseconds()).Scan(&killed))
		require.Positive(t, killed)
	}

	var total, polledOnce int
	require.NoError(t, admin.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE attempts = 1 AND failures = 0 AND outcome = 'done')
		FROM corotask.tasks`).Scan(&total, &polledOnce))
	require.Equal(t, rounds*perRound, total)
	require.Equal(t, total, polledOnce, "a task was polled twice or counted as failed")
	for _, msg := range w.seen() {
		require.True(t, strings.Contains(msg, "severed") && strings.Contains(msg, "at once"),
			"the executor backed off or failed after its connections were killed: %q", msg)
	}
}
