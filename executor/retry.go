package executor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/corotask/corotask/tasks"
)

// retry runs write until it succeeds, fails in a way a retry cannot fix (the
// database refused it), or the poll's claim expires. Writes are fenced on the
// claim, so running one twice (a commit whose reply was lost) is harmless.
func (cm *committer) retry(pctx context.Context, c *claimed, write func() error) error {
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
		if cm.atOnce(err, attempt) {
			// Another connection most likely works: no wait.
			cm.log.Warn("corotask: database write's connection was severed; retrying at once", "task", c.id, "error", err)
			continue
		}
		d := backoff(50*time.Millisecond, 2*time.Second, attempt)
		cm.log.Warn("corotask: database write failed; retrying", "task", c.id, "error", err, "retry_in", d)
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
