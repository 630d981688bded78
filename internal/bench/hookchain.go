package bench

import (
	"context"

	"github.com/corotask/corotask/executor"
)

// hookChain passes every hook call on to next (the hooks Options.OTel
// turns on), if any. The scenarios' own hooks embed it and override the
// calls they look at (each calling next too).
type hookChain struct {
	executor.NoHooks
	next executor.Hooks
}

func (c *hookChain) ClaimDone(ctx context.Context, info *executor.ClaimInfo) {
	if c.next != nil {
		c.next.ClaimDone(ctx, info)
	}
}

func (c *hookChain) PollStart(ctx context.Context, info *executor.PollInfo) context.Context {
	if c.next != nil {
		return c.next.PollStart(ctx, info)
	}
	return ctx
}

func (c *hookChain) PollDone(ctx context.Context, info *executor.PollInfo, result *executor.PollResult) {
	if c.next != nil {
		c.next.PollDone(ctx, info, result)
	}
}

func (c *hookChain) CommitDone(ctx context.Context, info *executor.CommitInfo) {
	if c.next != nil {
		c.next.CommitDone(ctx, info)
	}
}

func (c *hookChain) HeartbeatDone(ctx context.Context, info *executor.HeartbeatInfo) {
	if c.next != nil {
		c.next.HeartbeatDone(ctx, info)
	}
}
