package executor

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/heartbeat"
	"github.com/corotask/corotask/internal/dberr"
	corosql "github.com/corotask/corotask/sql"
	"github.com/corotask/corotask/tasks"
)

// schemaGuard holds what the executor knows of the database's schema (see
// checkSchema and schemaFault).
type schemaGuard struct {
	// faults carries the first error of class 42 a statement of corotask's
	// own met (see schemaFault) to the claim loop, which stops Run.
	faults chan error
	// faulted is set by such an error: nothing more is claimed or started.
	faulted atomic.Bool
	// checked is set once PollOnce has found the schema fit; a schema
	// error clears it.
	checked atomic.Bool
	// keeperConns counts the connections the heartbeat keeper opened.
	keeperConns atomic.Int64
	// listenConns counts the LISTEN connections the executor opened.
	listenConns atomic.Int64
}

func newSchemaGuard() schemaGuard { return schemaGuard{faults: make(chan error, 1)} }

// checkSchema checks that this build runs on the database's schema (see
// corosql.CheckSchema): the schema is this build's, or a newer one that
// declares it compatible, which is logged. The error, if any, wraps the
// *sql.SchemaError.
func (e *Executor) checkSchema(ctx context.Context, db tasks.DB) error {
	found, err := corosql.CheckSchema(ctx, db)
	if err != nil {
		return fmt.Errorf("executor: %w", err)
	}
	if build := corosql.BuildSchema(); found.Migration > build.Migration {
		e.log.Info("corotask: running on a newer schema that declares this build compatible",
			"schema_migration", found.Migration, "build_migration", build.Migration, "compatible_from", found.CompatibleFrom)
	}
	return nil
}

// isSchemaFault reports whether err, from one of corotask's own statements,
// is of class 42 (see dberr.FromSchema): the database is not what this build
// expects. An error an OnCommit function returned is the poll's own, whatever
// its class.
func isSchemaFault(err error) bool {
	return err != nil && !errors.Is(err, errOnCommit) && dberr.FromSchema(err)
}

// schemaFault reports whether err is a schema fault (see isSchemaFault); if
// so, the executor claims and starts nothing more, and Run stops (see
// claimLoop). Such an error is never counted against a task: its claim is
// given back.
func (e *Executor) schemaFault(err error) bool {
	if !isSchemaFault(err) {
		return false
	}
	e.stopForSchema(err)
	return true
}

// stopForSchema makes the executor claim and start nothing more, and Run
// stop, because of err.
func (e *Executor) stopForSchema(err error) {
	if !e.schema.faulted.Swap(true) {
		e.log.Error("corotask: a statement of corotask failed on the database's schema; stopping", "error", err)
	}
	e.schema.checked.Store(false)
	select {
	case e.schema.faults <- err:
	default:
	}
	e.signal()
}

// schemaStop is the error Run returns after the schema fault fault: the
// schema checked again (a *sql.SchemaError when it does not fit this build),
// else fault itself.
func (e *Executor) schemaStop(ctx context.Context, fault error) error {
	ctx = context.WithoutCancel(ctx)
	if err := e.checkSchema(ctx, e.pool); err != nil {
		var se *corosql.SchemaError
		if errors.As(err, &se) {
			e.log.Error("corotask: the database's schema does not fit this build", "error", err)
			return err
		}
	}
	return fmt.Errorf("executor: a statement of corotask failed on the database's schema: %w", fault)
}

// giveBackFaulted releases, best effort, the claim of a poll whose outcome
// a schema fault kept from being written: nothing is counted against the
// task, which is ready again at once (for an executor of a build that fits).
func (e *Executor) giveBackFaulted(ctx context.Context, c *claimed) {
	if err := e.release(context.WithoutCancel(ctx), 0, c); err != nil {
		e.log.Warn("corotask: give back a claim after a schema error", "task", c.id, "error", err)
	}
}

// keeperConnect wraps the heartbeat keeper's ConnectFunc: a connection it
// opens again (after a lost one: a restarted server, a failover) checks the
// schema first, and a schema that no longer fits stops the executor.
func (e *Executor) keeperConnect(connect heartbeat.ConnectFunc) heartbeat.ConnectFunc {
	return func(ctx context.Context) (*pgx.Conn, error) {
		conn, err := connect(ctx)
		if err != nil || e.schema.keeperConns.Add(1) == 1 {
			return conn, err // the first: Run checked at start
		}
		if err := e.recheckSchema(ctx, conn); err != nil {
			_ = conn.Close(context.WithoutCancel(ctx))
			return nil, err
		}
		return conn, nil
	}
}

// recheckSchema checks the schema on a connection opened again (after a lost
// one: a restarted server, a failover); a schema that no longer fits stops
// the executor.
func (e *Executor) recheckSchema(ctx context.Context, db tasks.DB) error {
	err := e.checkSchema(ctx, db)
	var se *corosql.SchemaError
	if errors.As(err, &se) {
		e.stopForSchema(err)
	}
	return err
}
