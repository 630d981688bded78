package executor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/corotask/corotask/internal/dberr"
	"github.com/corotask/corotask/tasks"
)

// settle records the outcome of a poll: commit it, record its failure, or
// release its claim, depending on how it ended. It returns the error of a
// commit the database refused, which failed the poll, or a schema fault (see
// schemaFault), which gave its claim back and counted nothing.
func (e *Executor) settle(pctx context.Context, c *claimed, out *outcome, opts typeOptions) error {
	// Writes must go through even while the executor shuts down; the
	// heartbeat keeper still renews the claim meanwhile.
	ctx := context.WithoutCancel(pctx)
	cause := context.Cause(pctx)
	switch {
	case errors.Is(cause, ErrCanceled):
		// Logged with the other polls the cancel stopped, in one line.
		e.canceled.add(c.id)
		e.recordLost(ctx, c, "canceled", cause.Error(), opts.history())
	case errors.Is(cause, ErrClaimLost), errors.Is(cause, ErrRenewTimeout):
		e.log.Warn("corotask: poll's claim was lost; its outcome is discarded", "task", c.id, "type", c.typ, "cause", cause)
		e.recordLost(ctx, c, "claim_lost", cause.Error(), opts.history())
	case errors.Is(cause, ErrShutdown):
		if err := e.retry(pctx, c, func() error { return e.release(ctx, 0, c) }); err != nil {
			e.log.Error("corotask: release claim", "task", c.id, "error", err)
		}
	case out.err != nil:
		return e.fail(ctx, pctx, c, out.err, opts)
	default:
		err := e.commit(ctx, pctx, c, out, opts.history())
		switch {
		case err == nil:
		case e.schemaFault(err):
			// The database is not what this build expects: not the poll's
			// fault, and nothing of it is counted.
			e.log.Error("corotask: commit poll: the database's schema does not fit this build; the claim is given back",
				"task", c.id, "type", c.typ, "error", err)
			e.giveBackFaulted(ctx, c)
			return err
		case !transient(err):
			// The database refused the poll's effects (a message to an ended
			// task, a failing OnCommit): the poll fails as a whole.
			e.fail(ctx, pctx, c, err, opts)
			return err
		default:
			// The claim will go stale and the task be polled again.
			e.log.Error("corotask: commit poll", "task", c.id, "type", c.typ, "error", err)
		}
	}
	return nil
}

var errOnCommit = errors.New("OnCommit")

// commit writes a successful poll's outcome, fenced on its claim: through
// the batch committer when it runs and the poll has no OnCommit work (many
// polls then share one transaction), else in a transaction of its own.
func (e *Executor) commit(ctx, pctx context.Context, c *claimed, out *outcome, history int16) error {
	if len(out.spawns) > 0 || len(out.sends) > 0 {
		out.trace = tasks.TraceFrom(pctx)
	}
	if len(out.onCommit) == 0 {
		err, queued := e.queueCommit(ctx, c, out, history)
		if queued && (err == nil || isSchemaFault(err)) {
			return err // committed, or a schema fault the poll alone would meet too
		}
		// Not queued, or the batch failed: commit on its own, where an
		// error concerns this poll alone.
	}
	return e.retry(pctx, c, func() error { return e.commitTx(ctx, c, out, history) })
}

// commitTx commits one poll in its own transaction, with its OnCommit work.
func (e *Executor) commitTx(ctx context.Context, c *claimed, out *outcome, history int16) error {
	args, err := e.commitArgs([]*pendingCommit{{c: c, out: out, history: history}})
	if err != nil {
		return err
	}
	defer e.hooks.commitDone(ctx, e.hooks.now(), 1, 0, &err)
	as := fenced
	err = pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		var id tasks.ID
		var dropped bool
		err := tx.QueryRow(ctx, commitSQL, args...).Scan(&id, &dropped)
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
	e.logCommitted(ctx, c, out, as, history)
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

func (e *Executor) logCommitted(ctx context.Context, c *claimed, out *outcome, as committedAs, history int16) {
	e.hooks.committed(c, as)
	switch as {
	case fenced:
		e.log.Warn("corotask: "+commitRefused, "task", c.id, "type", c.typ)
		e.recordLost(ctx, c, "claim_lost", commitRefused, history)
		return
	case superseded:
		e.log.Debug("corotask: poll superseded: it returned done while messages arrived; polling again", "task", c.id, "type", c.typ)
		return
	}
	if e.log.Enabled(context.Background(), slog.LevelDebug) {
		e.log.Debug("corotask: poll committed", "task", c.id, "type", c.typ, "action", out.action.String(),
			"spawned", len(out.spawns), "sent", len(out.sends))
	}
}

// fail records a failed poll: failures+1, last_error, backoff; or the end of
// the task when it reached its type's MaxFailures. It returns a schema fault
// that kept it from recording it (the claim is then given back).
func (e *Executor) fail(ctx, pctx context.Context, c *claimed, pollErr error, opts typeOptions) error {
	delay := backoff(cmp.Or(opts.backoffMin, e.cfg.BackoffMin), cmp.Or(opts.backoffMax, e.cfg.BackoffMax), c.failures+1)
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
	err := e.retry(pctx, c, func() error {
		return e.pool.QueryRow(ctx, `SELECT claim_lost, ended FROM corotask.fail_poll($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
			c.id, pgtype.UUID{Bytes: c.claim, Valid: true}, storableText(text), delay, opts.maxFailures,
			outcome, storableText(stack), opts.history(), e.cfg.HistoryKeepFirst, e.cfg.HistoryKeepLast).Scan(&lost, &ended)
	})
	e.hooks.failed(c, pollErr, lost, ended, err)
	switch {
	case e.schemaFault(err):
		e.log.Error("corotask: record poll failure: the database's schema does not fit this build; the claim is given back",
			append(attrs, "db_error", err)...)
		e.giveBackFaulted(ctx, c)
		return err
	case err != nil:
		e.log.Error("corotask: record poll failure", append(attrs, "db_error", err)...)
	case lost:
		e.log.Warn("corotask: poll failed and its claim was lost", attrs...)
	case ended:
		e.log.Error("corotask: task failed for good after too many failures", attrs...)
	default:
		e.log.Warn("corotask: poll failed; retrying later", append(attrs, "retry_in", delay)...)
	}
	return nil
}

// recordLost records, in the task's history, a poll whose claim was lost
// (or whose task was canceled) before it could commit. The claim is gone, so
// this is best effort: one try, logged when it fails.
func (e *Executor) recordLost(ctx context.Context, c *claimed, outcome, reason string, history int16) {
	if history == 0 {
		return
	}
	if _, err := e.pool.Exec(ctx, `SELECT corotask.record_lost($1, $2, $3, $4, $5, $6)`,
		c.id, c.attempt, outcome, e.id, c.claimedAt, storableText(reason)); err != nil {
		e.log.Warn("corotask: record lost claim in history", "task", c.id, "error", dberr.Translate(err))
		e.schemaFault(err)
	}
}

// storableText makes s fit a PostgreSQL text column, which refuses NUL
// characters and invalid UTF-8: an error text that cannot be stored would
// leave the failure unrecorded and the claim held.
func storableText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", `\x00`)
}

// release gives claims back without counting a failure; the tasks are ready
// again after delay.
func (e *Executor) release(ctx context.Context, delay time.Duration, cs ...*claimed) error {
	ids, tokens := claimArgs(cs)
	var n int
	if err := e.pool.QueryRow(ctx, `SELECT corotask.release_claims($1, $2, $3)`, ids, tokens, delay).Scan(&n); err != nil {
		e.schemaFault(err)
		return fmt.Errorf("release %d claims: %w", len(cs), dberr.Translate(err))
	}
	e.log.Info("corotask: released claims", "claims", n)
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

// retry runs write until it succeeds, fails in a way a retry cannot fix (the
// database refused it), or the poll's claim expires. Writes are fenced on the
// claim, so running one twice (a commit whose reply was lost) is harmless.
func (e *Executor) retry(pctx context.Context, c *claimed, write func() error) error {
	for attempt := 1; ; attempt++ {
		err := write()
		if err == nil || !transient(err) {
			return err
		}
		if cause := context.Cause(pctx); errors.Is(cause, ErrRenewTimeout) || errors.Is(cause, ErrClaimLost) {
			return fmt.Errorf("%w (%w)", err, cause)
		}
		if attempt >= 100 {
			return err
		}
		if e.atOnce(err, attempt) {
			// Another connection most likely works: no wait.
			e.log.Warn("corotask: database write's connection was severed; retrying at once", "task", c.id, "error", err)
			continue
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
			if cause := context.Cause(pctx); errors.Is(cause, ErrRenewTimeout) || errors.Is(cause, ErrClaimLost) {
				return fmt.Errorf("%w (%w)", err, cause)
			}
		}
	}
}

// transient reports whether err is the database's fault rather than the
// poll's, and may go away if the write is tried again. It knows what is
// permanent and treats the rest as transient:
//
//   - corotask's own refusals: its sentinels (tasks.ErrNotFound, ErrEnded,
//     ErrTooLarge, ErrExists) and SQLSTATEs of class CT;
//   - what the poll wrote or ran: data exceptions (class 22), integrity
//     constraint violations (23), syntax errors and access rules (42),
//     errors raised by user code (class P0: RAISE EXCEPTION, ASSERT),
//     cardinality violations (21), features not supported (0A), values past
//     a program limit (54), errors of external and SQL routines (38, 39, 2F),
//     WITH CHECK OPTION violations (44), and invalid transaction states
//     (class 25, but for 25006 and the session timeouts 25P03, 25P04): an
//     OnCommit function that went on after a statement of its own failed
//     leaves the transaction aborted (25P02), and so does a commit that
//     became a rollback (pgx.ErrTxCommitRollback);
//   - a panic, or an error an OnCommit function returned that is not a
//     database error.
//
// Everything else the server reports is transient: a statement canceled by
// statement_timeout (57014), a lock not available (55P03), a read-only
// server after a failover (25006), too many connections (53300),
// serialization failures and deadlocks (40001, 40P01), lost or refused
// connections (class 08), a server shutting down or starting up (57P01-
// 57P03), and so is an error from the driver itself (a broken connection).
func transient(err error) bool {
	if err == nil || errors.Is(err, tasks.ErrEnded) || errors.Is(err, tasks.ErrNotFound) ||
		errors.Is(err, tasks.ErrTooLarge) || errors.Is(err, tasks.ErrExists) {
		return false
	}
	var p *PanicError
	if errors.As(err, &p) || errors.Is(err, pgx.ErrTxCommitRollback) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return !permanentSQLState(pgErr.Code)
	}
	return !errors.Is(err, errOnCommit)
}

// transientDBError reports whether err holds a database error that is
// transient: an OnCommit function's own errors are permanent, but not the
// database's errors it passes on.
func transientDBError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && transient(err)
}

// permanentSQLState reports whether a SQLSTATE says the statement itself is
// at fault, so that running it again would fail again.
func permanentSQLState(code string) bool {
	if len(code) != 5 {
		return false
	}
	switch code[:2] {
	case "CT", "0A", "21", "22", "23", "2F", "38", "39", "42", "44", "54", "P0":
		return true
	case "25":
		// A read-only server after a failover, or a session timeout, may
		// be gone at the next try; an aborted transaction is the code's.
		return code != "25006" && code != "25P03" && code != "25P04"
	}
	return false
}
