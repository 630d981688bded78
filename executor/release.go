package executor

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/corotask/corotask/internal/dberr"
	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/tasks"
)

// release gives claims back without counting a failure; the tasks are ready
// again after delay.
func (cm *committer) release(ctx context.Context, delay time.Duration, cs ...*claimed) error {
	ids, tokens := claimArgs(cs)
	var n int
	if err := cm.pool.QueryRow(ctx, query.ReleaseClaims, ids, tokens, delay).Scan(&n); err != nil {
		cm.schema.fault(err)
		return fmt.Errorf("release %d claims: %w", len(cs), dberr.Translate(err))
	}
	cm.log.Info("corotask: released claims", "claims", n)
	return nil
}

// claimArgs returns the tasks of cs and their claim tokens, as release_claims
// takes them.
func claimArgs(cs []*claimed) ([]tasks.ID, []pgtype.UUID) {
	ids := make([]tasks.ID, len(cs))
	tokens := make([]pgtype.UUID, len(cs))
	for i, c := range cs {
		ids[i], tokens[i] = c.id, pgtype.UUID{Bytes: c.claim, Valid: true}
	}
	return ids, tokens
}

// giveBack releases claims this executor took but will not poll; their
// tasks are ready again after delay. A release that fails for the database's
// sake is tried again for up to 10 s (at once after a severed connection):
// a claim not given back waits for its expiry, and is then taken over as a
// failed attempt.
func (cm *committer) giveBack(cs []*claimed, delay time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for attempt := 1; ; attempt++ {
		err := cm.release(ctx, delay, cs...)
		if err == nil {
			return
		}
		if !transient(err) || ctx.Err() != nil {
			cm.log.Error("corotask: release claims", "claims", len(cs), "error", err)
			return
		}
		if cm.atOnce(err, attempt) {
			continue
		}
		t := time.NewTimer(backoff(50*time.Millisecond, time.Second, attempt))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
}

// giveBackFaulted releases, best effort, the claim of a poll whose outcome
// a schema fault kept from being written: nothing is counted against the
// task, which is ready again at once (for an executor of a build that fits).
func (cm *committer) giveBackFaulted(ctx context.Context, c *claimed) {
	if err := cm.release(context.WithoutCancel(ctx), 0, c); err != nil {
		cm.log.Warn("corotask: give back a claim after a schema error", "task", c.id, "error", err)
	}
}
