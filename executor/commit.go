package executor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/corotask/corotask/heartbeat"
	"github.com/corotask/corotask/tasks"
)

// settle records the outcome of a poll: commit it, record its failure, or
// release its claim, depending on how it ended.
func (e *Executor) settle(pctx context.Context, c *claimed, out outcome, opts typeOptions) {
	// Writes must go through even while the executor shuts down; the
	// heartbeat keeper still renews the claim meanwhile.
	ctx := context.WithoutCancel(pctx)
	cause := context.Cause(pctx)
	switch {
	case errors.Is(cause, heartbeat.ErrClaimLost), errors.Is(cause, heartbeat.ErrRenewTimeout), errors.Is(cause, ErrCanceled):
		e.log.Warn("corotask: poll's claim was lost; its outcome is discarded", "task", c.id, "type", c.typ, "cause", cause)
	case errors.Is(cause, ErrShutdown):
		if err := e.retry(pctx, c, func() error { return e.release(ctx, c) }); err != nil {
			e.log.Error("corotask: release claim", "task", c.id, "error", err)
		}
	case out.err != nil:
		e.fail(ctx, pctx, c, out.err, opts)
	default:
		err := e.retry(pctx, c, func() error { return e.commit(ctx, c, out) })
		switch {
		case err == nil:
		case !retryable(err):
			// The database refused the poll's effects (a message to an ended
			// task, a failing OnCommit): the poll fails as a whole.
			e.fail(ctx, pctx, c, err, opts)
		default:
			// The claim will go stale and the task be polled again.
			e.log.Error("corotask: commit poll", "task", c.id, "type", c.typ, "error", err)
		}
	}
}

var errOnCommit = errors.New("OnCommit")

// commit writes a successful poll's outcome in one transaction, fenced on
// its claim.
func (e *Executor) commit(ctx context.Context, c *claimed, out outcome) error {
	n := len(out.spawns)
	spawnIDs, spawnTypes := make([]tasks.ID, n), make([]string, n)
	spawnStates, spawnMsgs := make([][]byte, n), make([][]byte, n)
	for i, s := range out.spawns {
		spawnIDs[i], spawnTypes[i] = s.ID, string(s.Type)
		spawnStates[i], _ = s.State.([]byte)
		spawnMsgs[i], _ = s.Message.([]byte)
	}
	sendTo, sendMsgs := make([]tasks.ID, len(out.sends)), make([][]byte, len(out.sends))
	for i, s := range out.sends {
		sendTo[i], sendMsgs[i] = s.to, s.body
	}
	var at *time.Time
	if out.action.kind == actUntil {
		at = &out.action.at
	}
	args := []any{c.id, pgtype.UUID{Bytes: c.claim, Valid: true}, out.state, out.taken,
		out.action.sqlName(), out.action.sleep, at, out.result,
		spawnIDs, spawnTypes, spawnStates, spawnMsgs, sendTo, sendMsgs}
	const q = `SELECT corotask.commit_poll($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`

	var ok bool
	if len(out.onCommit) == 0 {
		if err := e.pool.QueryRow(ctx, q, args...).Scan(&ok); err != nil {
			return tasks.TranslateError(err)
		}
	} else {
		err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
			if err := tx.QueryRow(ctx, q, args...).Scan(&ok); err != nil || !ok {
				return err // !ok: nothing to commit; the rollback changes nothing
			}
			for _, fn := range out.onCommit {
				if err := fn(ctx, tx); err != nil {
					return fmt.Errorf("%w: %w", errOnCommit, err)
				}
			}
			return nil
		})
		if err != nil {
			return tasks.TranslateError(err)
		}
	}
	if !ok {
		e.log.Warn("corotask: commit refused: the claim was lost (task canceled or taken by another executor)", "task", c.id, "type", c.typ)
		return nil
	}
	e.log.Debug("corotask: poll committed", "task", c.id, "type", c.typ, "action", out.action.String(),
		"spawned", n, "sent", len(out.sends))
	return nil
}

// fail records a failed poll: failures+1, last_error, backoff; or the end of
// the task when it reached its type's MaxFailures.
func (e *Executor) fail(ctx, pctx context.Context, c *claimed, pollErr error, opts typeOptions) {
	delay := backoff(e.cfg.BackoffMin, e.cfg.BackoffMax, c.failures+1)
	attrs := []any{"task", c.id, "type", c.typ, "failures", c.failures + 1, "error", pollErr}
	var p *PanicError
	if errors.As(pollErr, &p) {
		attrs = append(attrs, "stack", string(p.Stack))
	}
	var lost, ended bool
	err := e.retry(pctx, c, func() error {
		return e.pool.QueryRow(ctx, `SELECT claim_lost, ended FROM corotask.fail_poll($1, $2, $3, $4, $5)`,
			c.id, pgtype.UUID{Bytes: c.claim, Valid: true}, pollErr.Error(), delay, opts.maxFailures).Scan(&lost, &ended)
	})
	switch {
	case err != nil:
		e.log.Error("corotask: record poll failure", append(attrs, "db_error", err)...)
	case lost:
		e.log.Warn("corotask: poll failed and its claim was lost", attrs...)
	case ended:
		e.log.Error("corotask: task failed for good after too many failures", attrs...)
	default:
		e.log.Warn("corotask: poll failed; retrying later", append(attrs, "retry_in", delay)...)
	}
}

// release gives claims back without counting a failure.
func (e *Executor) release(ctx context.Context, cs ...*claimed) error {
	ids := make([]tasks.ID, len(cs))
	tokens := make([]pgtype.UUID, len(cs))
	for i, c := range cs {
		ids[i], tokens[i] = c.id, pgtype.UUID{Bytes: c.claim, Valid: true}
	}
	var n int
	if err := e.pool.QueryRow(ctx, `SELECT corotask.release_claims($1, $2)`, ids, tokens).Scan(&n); err != nil {
		return fmt.Errorf("release %d claims: %w", len(cs), tasks.TranslateError(err))
	}
	e.log.Info("corotask: released claims", "claims", n)
	return nil
}

// retry runs write until it succeeds, fails in a way a retry cannot fix (the
// database refused it), or the poll's claim expires. Writes are fenced on the
// claim, so running one twice (a commit whose reply was lost) is harmless.
func (e *Executor) retry(pctx context.Context, c *claimed, write func() error) error {
	for attempt := 1; ; attempt++ {
		err := write()
		if err == nil || !retryable(err) {
			return err
		}
		if cause := context.Cause(pctx); errors.Is(cause, heartbeat.ErrRenewTimeout) || errors.Is(cause, heartbeat.ErrClaimLost) {
			return fmt.Errorf("%w (%w)", err, cause)
		}
		if attempt >= 100 {
			return err
		}
		d := backoff(50*time.Millisecond, 2*time.Second, attempt)
		e.log.Warn("corotask: database write failed; retrying", "task", c.id, "error", err, "retry_in", d)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-pctx.Done():
			t.Stop()
			// Canceled only for shutdown or a lost claim: one more try below
			// unless the claim is gone.
			if cause := context.Cause(pctx); errors.Is(cause, heartbeat.ErrRenewTimeout) || errors.Is(cause, heartbeat.ErrClaimLost) {
				return fmt.Errorf("%w (%w)", err, cause)
			}
		}
	}
}

// retryable reports whether err may go away by itself: anything but an error
// the server raised, a corotask sentinel, or a failing OnCommit.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Serialization failures and deadlocks are worth another try.
		return pgErr.Code == "40001" || pgErr.Code == "40P01"
	}
	return !errors.Is(err, errOnCommit) && !errors.Is(err, tasks.ErrEnded) && !errors.Is(err, tasks.ErrNotFound) &&
		!errors.Is(err, tasks.ErrTooLarge) && !errors.Is(err, tasks.ErrExists) && !errors.Is(err, context.DeadlineExceeded)
}
