package executor_test

import (
	"context"
	"log/slog"
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

// An executor whose every connection is killed (an idle-session killer, a
// failover, a pooler's restart), between tasks and while polls run, goes on
// at once on new ones: its claims, commits, LISTEN and renewals retry at once
// rather than back off, and no task is polled twice or counted as failed.
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
	e := executor.MustNew(testdb.Pool(t, url), cfg)
	// The polls of round blocked wait for the gate, which opens once every
	// connection of the executor was killed under them.
	const rounds, perRound, blocked = 4, 8, 2
	gate, started := make(chan struct{}), make(chan struct{}, perRound)
	executor.Register(e, "job", executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
		if t.State == blocked {
			started <- struct{}{}
			<-gate
		}
		return executor.Done(), nil
	}))
	defer start(t, e)()

	killAll := func() {
		// Every other backend of the database: the executor's pool, its
		// LISTEN connection and its heartbeat connection.
		var killed int
		require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, $1))
			FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`,
			testdb.Patience.Milliseconds()).Scan(&killed))
		require.Positive(t, killed)
	}
	for round := range rounds {
		specs := make([]tasks.Spec, perRound)
		for i := range specs {
			specs[i] = tasks.Spec{Type: "job", State: round}
		}
		_, err := tasks.CreateMany(ctx, admin, specs)
		require.NoError(t, err)
		if round == blocked {
			for range perRound { // Concurrency is 8: all at once
				<-started
			}
			killAll()
			close(gate)
		}
		require.Eventually(t, func() bool {
			var left int
			require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM corotask.tasks WHERE done_at IS NULL`).Scan(&left))
			return left == 0
		}, testdb.Patience, 5*time.Millisecond, "round %d's tasks were not all done", round)
		killAll()
	}

	var total, polledOnce int
	require.NoError(t, admin.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE attempts = 1 AND failures = 0 AND outcome = 'done')
		FROM corotask.tasks`).Scan(&total, &polledOnce))
	require.Equal(t, rounds*perRound, total)
	require.Equal(t, total, polledOnce, "a task was polled twice or counted as failed")
	// What the executor logs when it waits before trying again.
	for _, msg := range w.seen() {
		for _, backoff := range []string{"claim failed; retrying", "database write failed; retrying",
			"LISTEN connection lost; reconnecting", "heartbeat renewal failed", "release claims"} {
			require.NotContains(t, msg, backoff, "the executor backed off or failed after its connections were killed")
		}
	}
}
