package executor

import (
	"cmp"
	"fmt"
	"log/slog"
	"time"
)

// Config configures an Executor. Zero fields take the defaults documented on
// each field. A Config outside the limits documented on its fields makes New
// return an error that names the field.
// Whatever the Config, Run and PollOnce first check the database's schema,
// and refuse one this build does not run on (see Run).
type Config struct {
	// Concurrency is how many polls run at once in this executor. Default 100;
	// must not be negative.
	// A poll that has returned stops counting while its outcome is committed
	// (in a batch with others), so more tasks may be claimed meanwhile: the
	// executor holds at most 4×(Concurrency+PrioritySlots) claims,
	// Concurrency (and PrioritySlots) of them polling.
	Concurrency int
	// PrioritySlots is how many polls of tasks with a priority above 0 may
	// run beyond Concurrency. Such tasks already go first in every claim,
	// but behind an executor whose slots are all busy they wait for a slot
	// and for the claim in flight; with PrioritySlots, a claim of their own
	// takes them as soon as they are announced (or within PollInterval),
	// into these slots, while the claim loop goes on. Fleet-wide limits and
	// MaxConcurrency hold for them as for any poll. Each announcement of
	// one of the executor's types then costs a small claim while a priority
	// slot is free. Default 0: none; must not be negative.
	PrioritySlots int
	// HeartbeatTimeout is how long this executor's claims last unless
	// renewed: a claim, and each renewal, sets the claim's expiry to now plus
	// HeartbeatTimeout, stored with the claim. Any executor, whatever its own
	// HeartbeatTimeout, takes the task over once that expiry has passed (a
	// crashed or stalled executor), counting the attempt as a failed poll.
	// Default 30s; must not be negative.
	HeartbeatTimeout time.Duration
	// HeartbeatInterval is how often the claims of in-flight polls are renewed,
	// all in one statement. Default HeartbeatTimeout/3. It must be shorter
	// than HeartbeatTimeout, else claims go stale between renewals and are
	// taken over from live executors; at most HeartbeatTimeout/2 is
	// recommended, so that a claim survives one failed renewal.
	HeartbeatInterval time.Duration
	// PollInterval is how often the executor looks for ready tasks when it
	// hears nothing through LISTEN/NOTIFY (or always, with DisableListen), and
	// looks for tasks whose claim expired. Default 1s; must not be
	// negative.
	PollInterval time.Duration
	// ShutdownTimeout is how long Run waits for in-flight polls after its
	// context ends, before it cancels them and releases their claims. Default
	// 10s; must not be negative.
	ShutdownTimeout time.Duration
	// DisableListen turns LISTEN/NOTIFY off, for connection poolers such as
	// PgBouncer in transaction mode; the executor then finds work every
	// PollInterval.
	DisableListen bool
	// Retention is how long ended (done, failed, canceled) tasks are kept
	// before this executor deletes them. Default 7 days; negative keeps them
	// forever.
	Retention time.Duration
	// RetentionInterval is how often expired tasks are looked for. Default 1m;
	// must not be negative.
	RetentionInterval time.Duration
	// DisableVacuum stops the executor from vacuuming corotask's tables
	// (tasks, messages, history) itself. It only does so when the server's
	// autovacuum is off and dead rows pile up (see Executor.VacuumIfNeeded);
	// it needs to own the tables.
	DisableVacuum bool
	// DisableEagerChildren leaves every child a poll spawns for the next
	// claim, by any executor. By default, a child of a type this executor
	// polls, spawned without a message, is created already claimed by this
	// executor, in the commit that creates it, when a slot is free for it:
	// it is polled at once, without a claim statement (as Temporal's eager
	// activities are). Children then go ahead of older ready tasks on this
	// executor; set this to spread a workflow's children over executors.
	DisableEagerChildren bool
	// BackoffMin and BackoffMax bound the delay before a failed task is polled
	// again: BackoffMin doubled for each consecutive failure, capped at
	// BackoffMax, with jitter. Defaults 1s and 10m; neither may be negative,
	// and BackoffMin must not exceed BackoffMax.
	BackoffMin, BackoffMax time.Duration
	// HistoryKeepFirst and HistoryKeepLast bound each task's history
	// (corotask.history): its first HistoryKeepFirst attempts and its last
	// HistoryKeepLast are kept, those in between deleted as new ones are
	// recorded. Defaults 20 and 100; must not be negative (0 takes the
	// default).
	HistoryKeepFirst, HistoryKeepLast int
	// Logger receives the executor's logs. Default slog.Default().
	Logger *slog.Logger
	// Hooks observe the executor's claims, polls, commits and heartbeats,
	// e.g. for metrics and traces (see package otelcorotask). Default none,
	// which costs nothing.
	Hooks Hooks
}

func (c Config) withDefaults() Config {
	c.Concurrency = cmp.Or(c.Concurrency, 100)
	c.HeartbeatTimeout = cmp.Or(c.HeartbeatTimeout, 30*time.Second)
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, c.HeartbeatTimeout/3)
	c.PollInterval = cmp.Or(c.PollInterval, time.Second)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, 10*time.Second)
	c.Retention = cmp.Or(c.Retention, 7*24*time.Hour)
	c.RetentionInterval = cmp.Or(c.RetentionInterval, time.Minute)
	c.BackoffMin = cmp.Or(c.BackoffMin, time.Second)
	c.BackoffMax = cmp.Or(c.BackoffMax, 10*time.Minute)
	c.HistoryKeepFirst = cmp.Or(c.HistoryKeepFirst, 20)
	c.HistoryKeepLast = cmp.Or(c.HistoryKeepLast, 100)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// validate checks a Config that has its defaults, and says which field is
// wrong and why.
func (c Config) validate() error {
	for _, n := range []struct {
		name string
		v    int
	}{{"Concurrency", c.Concurrency}, {"PrioritySlots", c.PrioritySlots}, {"HistoryKeepFirst", c.HistoryKeepFirst}, {"HistoryKeepLast", c.HistoryKeepLast}} {
		if n.v < 0 {
			return fmt.Errorf("executor: Config.%s (%d) must not be negative", n.name, n.v)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"HeartbeatTimeout", c.HeartbeatTimeout},
		{"HeartbeatInterval", c.HeartbeatInterval},
		{"PollInterval", c.PollInterval},
		{"ShutdownTimeout", c.ShutdownTimeout},
		{"RetentionInterval", c.RetentionInterval},
		{"BackoffMin", c.BackoffMin},
		{"BackoffMax", c.BackoffMax},
	} {
		if d.v < 0 {
			return fmt.Errorf("executor: Config.%s (%s) must not be negative", d.name, d.v)
		}
	}
	switch {
	case c.HeartbeatInterval == 0:
		// Only a HeartbeatTimeout of a few nanoseconds gets here.
		return fmt.Errorf("executor: Config.HeartbeatInterval (0s, HeartbeatTimeout/3) must be positive")
	case c.HeartbeatInterval >= c.HeartbeatTimeout:
		return fmt.Errorf("executor: Config.HeartbeatInterval (%s) must be shorter than HeartbeatTimeout (%s)", c.HeartbeatInterval, c.HeartbeatTimeout)
	case c.BackoffMin > c.BackoffMax:
		return fmt.Errorf("executor: Config.BackoffMin (%s) must not exceed BackoffMax (%s)", c.BackoffMin, c.BackoffMax)
	}
	return nil
}
