package executor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/corotask/corotask/internal/dberr"
	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/tasks"
)

// settle records the outcome of a poll: commit it, record its failure, or
// release its claim, depending on how it ended. It returns the error of a
// commit the database refused, which failed the poll, or a schema fault (see
// schemaGuard.fault), which gave its claim back and counted nothing.
func (cm *committer) settle(pctx context.Context, c *claimed, out *outcome, opts typeOptions) error {
	// A poll of a type with flow controls frees its slot under them when
	// its claim is released, here, not when it returns: a claim may then
	// take the next task that waits on them, if the last claim left some
	// (a claim that took all it asked for is followed by another anyway).
	if cm.controlled.has(c.typ) && cm.controlled.short.Load() {
		defer cm.signal()
	}
	// Writes must go through even while the executor shuts down; the
	// heartbeat keeper still renews the claim meanwhile.
	ctx := context.WithoutCancel(pctx)
	cause := context.Cause(pctx)
	switch {
	case errors.Is(cause, ErrCanceled):
		// Logged with the other polls the cancel stopped, in one line.
		cm.canceled.add(c.id)
		cm.recordLost(ctx, c, "canceled", cause.Error(), opts.history())
	case errors.Is(cause, ErrClaimLost), errors.Is(cause, ErrRenewTimeout):
		cm.log.Warn("corotask: poll's claim was lost; its outcome is discarded", "task", c.id, "type", c.typ, "cause", cause)
		cm.recordLost(ctx, c, "claim_lost", cause.Error(), opts.history())
	case errors.Is(cause, ErrShutdown):
		if err := cm.retry(pctx, c, func() error { return cm.release(ctx, 0, c) }); err != nil {
			cm.log.Error("corotask: release claim", "task", c.id, "error", err)
		}
	case out.err != nil:
		return cm.fail(ctx, pctx, c, out.err, opts)
	default:
		err := cm.commit(ctx, pctx, c, out, opts.history())
		switch {
		case err == nil:
		case cm.schema.fault(err):
			// The database is not what this build expects: not the poll's
			// fault, and nothing of it is counted.
			cm.log.Error("corotask: commit poll: the database's schema does not fit this build; the claim is given back",
				"task", c.id, "type", c.typ, "error", err)
			cm.giveBackFaulted(ctx, c)
			return err
		case !transient(err):
			// The database refused the poll's effects (a message to an ended
			// task, a failing OnCommit): the poll fails as a whole.
			cm.fail(ctx, pctx, c, err, opts)
			return err
		default:
			// The claim will go stale and the task be polled again.
			cm.log.Error("corotask: commit poll", "task", c.id, "type", c.typ, "error", err)
		}
	}
	return nil
}

var errOnCommit = errors.New("OnCommit")

// commit writes a successful poll's outcome, fenced on its claim: through
// the batch committer when it runs and the poll has no OnCommit work (many
// polls then share one transaction), else in a transaction of its own.
func (cm *committer) commit(ctx, pctx context.Context, c *claimed, out *outcome, history int16) error {
	if len(out.spawns) > 0 || len(out.sends) > 0 {
		out.trace = tasks.TraceFrom(pctx)
	}
	if len(out.onCommit) == 0 {
		err, queued := cm.queue(ctx, c, out, history)
		if queued && (err == nil || isSchemaFault(err)) {
			return err // committed, or a schema fault the poll alone would meet too
		}
		// Not queued, or the batch failed: commit on its own, where an
		// error concerns this poll alone.
	}
	return cm.retry(pctx, c, func() error { return cm.commitTx(ctx, c, out, history) })
}

// commitTx commits one poll in its own transaction, with its OnCommit work.
func (cm *committer) commitTx(ctx context.Context, c *claimed, out *outcome, history int16) error {
	args, err := cm.commitArgs([]*pendingCommit{{c: c, out: out, history: history}})
	if err != nil {
		return err
	}
	defer cm.hooks.commitDone(ctx, cm.hooks.now(), 1, 0, &err)
	as := fenced
	err = pgx.BeginFunc(ctx, cm.pool, func(tx pgx.Tx) error {
		var id tasks.ID
		var dropped bool
		err := tx.QueryRow(ctx, query.CommitPolls, args).Scan(&id, &dropped)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // the claim was lost: nothing to commit
		}
		if err != nil {
			return err
		}
		if as = committed; dropped {
			as = superseded
			return nil // nothing of the poll is kept, its OnCommit work included
		}
		for _, fn := range out.onCommit {
			if err := runOnCommit(ctx, tx, fn); err != nil {
				if tx.Conn().IsClosed() || transientDBError(err) {
					// The connection or the database failed, not fn (a lock
					// wait past statement_timeout, a serialization failure):
					// the whole commit is retried.
					return err
				}
				return fmt.Errorf("%w: %w", errOnCommit, err)
			}
		}
		return nil
	})
	if err != nil {
		return dberr.Translate(err)
	}
	cm.logCommitted(ctx, c, out, as, history)
	return nil
}

// runOnCommit runs fn, turning a panic into a *PanicError: the transaction
// is then rolled back and the poll fails, as for an error from fn.
func runOnCommit(ctx context.Context, tx pgx.Tx, fn func(context.Context, pgx.Tx) error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = recovered("OnCommit", v)
		}
	}()
	return fn(ctx, tx)
}

// commitRefused is the history's error of a poll whose commit the fence refused.
const commitRefused = "commit refused: the claim was lost (task canceled or taken by another executor)"

func (cm *committer) logCommitted(ctx context.Context, c *claimed, out *outcome, as committedAs, history int16) {
	cm.hooks.committed(c, as)
	switch as {
	case fenced:
		cm.log.Warn("corotask: "+commitRefused, "task", c.id, "type", c.typ)
		cm.recordLost(ctx, c, "claim_lost", commitRefused, history)
		return
	case superseded:
		cm.log.Debug("corotask: poll superseded: it returned done while messages arrived; polling again", "task", c.id, "type", c.typ)
		return
	}
	if cm.log.Enabled(context.Background(), slog.LevelDebug) {
		cm.log.Debug("corotask: poll committed", "task", c.id, "type", c.typ, "action", out.action.String(),
			"spawned", len(out.spawns), "sent", len(out.sends))
	}
}

// fail records a failed poll: failures+1, last_error, backoff; or the end of
// the task when it reached its type's MaxFailures, or failed for good (see
// Fail). It returns a schema fault that kept it from recording it (the
// claim is then given back).
func (cm *committer) fail(ctx, pctx context.Context, c *claimed, pollErr error, opts typeOptions) error {
	maxFailures, forGood := opts.maxFailures, failsForGood(pollErr)
	if forGood {
		// fail_poll ends the task when failures+1 reaches max_failures: 1
		// always does, whatever the task's failures were.
		maxFailures = 1
	}
	delay := backoff(cmp.Or(opts.backoffMin, cm.cfg.BackoffMin), cmp.Or(opts.backoffMax, cm.cfg.BackoffMax), c.failures+1)
	attrs := []any{"task", c.id, "type", c.typ, "failures", c.failures + 1, "error", pollErr}
	// The error's text and, for a panic, its stack apart: the history keeps
	// them in two columns, and a parent's completion message gets the text.
	outcome, text, stack := "failed", pollErr.Error(), ""
	var p *PanicError
	if errors.As(pollErr, &p) {
		outcome, stack = "panicked", string(p.Stack)
		text = strings.Replace(text, "\n\n"+stack, "", 1)
		attrs[len(attrs)-1] = text
		attrs = append(attrs, "stack", stack)
	}
	var lost, ended bool
	err := cm.retry(pctx, c, func() error {
		return cm.pool.QueryRow(ctx, query.FailPoll, pgx.NamedArgs{
			"task": c.id, "claim": pgtype.UUID{Bytes: c.claim, Valid: true}, "error": storableText(text),
			"backoff": delay, "max_failures": maxFailures, "outcome": outcome, "stack": storableText(stack),
			"history": opts.history(), "keep_first": cm.cfg.HistoryKeepFirst, "keep_last": cm.cfg.HistoryKeepLast,
		}).Scan(&lost, &ended)
	})
	cm.hooks.failed(c, pollErr, lost, ended, err)
	switch {
	case cm.schema.fault(err):
		cm.log.Error("corotask: record poll failure: the database's schema does not fit this build; the claim is given back",
			append(attrs, "db_error", err)...)
		cm.giveBackFaulted(ctx, c)
		return err
	case err != nil:
		cm.log.Error("corotask: record poll failure", append(attrs, "db_error", err)...)
	case lost:
		cm.log.Warn("corotask: poll failed and its claim was lost", attrs...)
	case ended && forGood:
		cm.log.Error("corotask: task failed for good: its poll returned executor.Fail", attrs...)
	case ended:
		cm.log.Error("corotask: task failed for good after too many failures", attrs...)
	default:
		cm.log.Warn("corotask: poll failed; retrying later", append(attrs, "retry_in", delay)...)
	}
	return nil
}

// recordLost records, in the task's history, a poll whose claim was lost
// (or whose task was canceled) before it could commit. The claim is gone, so
// this is best effort: one try, logged when it fails.
func (cm *committer) recordLost(ctx context.Context, c *claimed, outcome, reason string, history int16) {
	if history == 0 {
		return
	}
	if _, err := cm.pool.Exec(ctx, query.FailRecordLost, pgx.NamedArgs{
		"task": c.id, "attempt": c.attempt, "outcome": outcome, "executor": cm.id,
		"claimed_at": c.claimedAt, "error": storableText(reason),
	}); err != nil {
		cm.log.Warn("corotask: record lost claim in history", "task", c.id, "error", dberr.Translate(err))
		cm.schema.fault(err)
	}
}

// storableText makes s fit a PostgreSQL text column, which refuses NUL
// characters and invalid UTF-8: an error text that cannot be stored would
// leave the failure unrecorded and the claim held.
func storableText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", `\x00`)
}
