package executor_test

import (
	"context"
	"log/slog"

	"github.com/corotask/corotask/executor"
)

// slowPolls logs the polls that take over a second, and those that fail.
type slowPolls struct {
	executor.NoHooks // every other event: nothing
	log              *slog.Logger
}

func (h slowPolls) PollDone(ctx context.Context, info *executor.PollInfo, res *executor.PollResult) {
	switch {
	case res.Outcome == executor.OutcomeFailed || res.Outcome == executor.OutcomePanicked:
		h.log.WarnContext(ctx, "poll failed", "task", info.Task, "type", info.Type, "attempt", info.Attempt,
			"error", res.Err, "task_ended", res.Ended)
	case res.Duration.Seconds() > 1:
		h.log.InfoContext(ctx, "slow poll", "task", info.Task, "type", info.Type, "took", res.Duration, "outcome", res.Outcome)
	}
}

// Hooks observe what an executor does; embed NoHooks and override the
// events of interest.
func ExampleHooks() {
	cfg := executor.Config{Hooks: slowPolls{log: slog.Default()}}
	_ = cfg // executor.MustNew(pool, cfg)
}
