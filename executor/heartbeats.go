package executor

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/heartbeat"
)

// heartbeats renews the claims of the executor's polls, those waiting for a
// slot included, through a heartbeat.Keeper on a connection of its own. The
// keeper's goroutine (a service of Run's) owns the renewals; the slots add a
// claim as they count it in, the polls remove it as they forget it.
type heartbeats struct {
	keeper *heartbeat.Keeper
}

func newHeartbeats(v *env) *heartbeats {
	renewed := v.hooks.heartbeatHook()
	return &heartbeats{keeper: heartbeat.NewDedicated(connectChecked(v.schema, heartbeat.ConnectLike(v.pool)), heartbeat.Config{
		Timeout: v.cfg.HeartbeatTimeout, Interval: v.cfg.HeartbeatInterval, Logger: v.cfg.Logger,
		Renewed: func(ctx context.Context, claims int, took time.Duration, err error) {
			v.schema.fault(err)
			if renewed != nil {
				renewed(ctx, claims, took, err)
			}
		},
	})}
}

// add has c's claim renewed, from claimedAt on; cancel stops its poll when
// the claim is lost.
func (h *heartbeats) add(c *claimed, claimedAt time.Time, cancel context.CancelCauseFunc) {
	h.keeper.Add(heartbeat.Claim{Task: c.id, Token: c.claim}, claimedAt, cancel)
}

// remove stops renewing c's claim.
func (h *heartbeats) remove(c *claimed) {
	h.keeper.Remove(heartbeat.Claim{Task: c.id, Token: c.claim})
}

// run renews the claims until ctx ends.
func (h *heartbeats) run(ctx context.Context) { _ = h.keeper.Run(ctx) }

// connectChecked wraps the heartbeat keeper's ConnectFunc: a connection it
// opens again (after a lost one: a restarted server, a failover) checks the
// schema first, and a schema that no longer fits stops the executor.
func connectChecked(g *schemaGuard, connect heartbeat.ConnectFunc) heartbeat.ConnectFunc {
	return func(ctx context.Context) (*pgx.Conn, error) {
		conn, err := connect(ctx)
		if err != nil || g.keeperConns.Add(1) == 1 {
			return conn, err // the first: Run checked at start
		}
		if err := g.recheck(ctx, conn); err != nil {
			_ = conn.Close(context.WithoutCancel(ctx))
			return nil, err
		}
		return conn, nil
	}
}
