package executor_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
)

// A Config outside its limits is refused by New with an error that names the
// field and the rule, rather than panicking in a background loop, spinning, or
// stealing claims from the executor itself; MustNew panics with that error.
func TestConfigIsValidated(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	for _, tc := range []struct {
		name string
		cfg  executor.Config
		want string // "" for a valid config
	}{
		{"negative Concurrency", executor.Config{Concurrency: -1}, "executor: Config.Concurrency (-1) must not be negative"},
		{"negative PrioritySlots", executor.Config{PrioritySlots: -2}, "executor: Config.PrioritySlots (-2) must not be negative"},
		{"negative HeartbeatTimeout", executor.Config{HeartbeatTimeout: -time.Second}, "executor: Config.HeartbeatTimeout (-1s) must not be negative"},
		{"negative HeartbeatInterval", executor.Config{HeartbeatInterval: -time.Second}, "executor: Config.HeartbeatInterval (-1s) must not be negative"},
		{"negative PollInterval", executor.Config{PollInterval: -time.Second}, "executor: Config.PollInterval (-1s) must not be negative"},
		{"negative ShutdownTimeout", executor.Config{ShutdownTimeout: -time.Second}, "executor: Config.ShutdownTimeout (-1s) must not be negative"},
		{"negative RetentionInterval", executor.Config{RetentionInterval: -time.Second}, "executor: Config.RetentionInterval (-1s) must not be negative"},
		{"negative BackoffMin", executor.Config{BackoffMin: -time.Second}, "executor: Config.BackoffMin (-1s) must not be negative"},
		{"negative BackoffMax", executor.Config{BackoffMax: -time.Second}, "executor: Config.BackoffMax (-1s) must not be negative"},
		{"interval over the timeout", executor.Config{HeartbeatInterval: 40 * time.Second, HeartbeatTimeout: 30 * time.Second},
			"executor: Config.HeartbeatInterval (40s) must be shorter than HeartbeatTimeout (30s)"},
		{"interval equal to the timeout", executor.Config{HeartbeatInterval: 10 * time.Second, HeartbeatTimeout: 10 * time.Second},
			"executor: Config.HeartbeatInterval (10s) must be shorter than HeartbeatTimeout (10s)"},
		{"interval over the default timeout", executor.Config{HeartbeatInterval: time.Minute},
			"executor: Config.HeartbeatInterval (1m0s) must be shorter than HeartbeatTimeout (30s)"},
		{"interval rounded to zero", executor.Config{HeartbeatTimeout: 2}, "executor: Config.HeartbeatInterval (0s, HeartbeatTimeout/3) must be positive"},
		{"BackoffMin over BackoffMax", executor.Config{BackoffMin: time.Hour, BackoffMax: time.Minute},
			"executor: Config.BackoffMin (1h0m0s) must not exceed BackoffMax (1m0s)"},
		{"BackoffMin over the default BackoffMax", executor.Config{BackoffMin: time.Hour},
			"executor: Config.BackoffMin (1h0m0s) must not exceed BackoffMax (10m0s)"},
		{"defaults", executor.Config{}, ""},
		{"negative Retention keeps ended tasks", executor.Config{Retention: -1}, ""},
		{"interval of half the timeout", executor.Config{HeartbeatInterval: 15 * time.Second}, ""},
		{"interval just under the timeout", executor.Config{HeartbeatInterval: 29 * time.Second}, ""},
		{"equal backoffs", executor.Config{BackoffMin: time.Minute, BackoffMax: time.Minute}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Logger = logger(t)
			tc.cfg.DisableListen, tc.cfg.DisableVacuum = true, true
			e, err := executor.New(db, tc.cfg) // never panics
			if tc.want != "" {
				require.EqualError(t, err, tc.want)
				require.Nil(t, e)
				require.PanicsWithError(t, tc.want, func() { executor.MustNew(db, tc.cfg) })
				return
			}
			require.NoError(t, err)
			executor.Register(e, "job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
				return executor.Done(), nil
			}))
			n, err := e.PollOnce(context.Background())
			require.NoError(t, err)
			require.Zero(t, n)
		})
	}
}

// New without a pool says so rather than panicking later.
func TestNewNeedsAPool(t *testing.T) {
	t.Parallel()
	e, err := executor.New(nil, executor.Config{})
	require.EqualError(t, err, "executor: New needs a pool (it was nil)")
	require.Nil(t, e)
}
