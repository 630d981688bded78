package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/internal/dberr"
	corosql "github.com/corotask/corotask/sql"
	"github.com/corotask/corotask/tasks"
)

// schemaGuard holds what the executor knows of the database's schema (see
// check and fault). Any goroutine may ask it: its state is atomic, and a
// fault reaches the claim loop through faults.
type schemaGuard struct {
	log    *slog.Logger
	pool   *pgxpool.Pool
	signal func() // wakes the claim loop
	// faults carries the first error of class 42 a statement of corotask's
	// own met (see fault) to the claim loop, which stops Run.
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

func newSchemaGuard(log *slog.Logger, pool *pgxpool.Pool, signal func()) *schemaGuard {
	return &schemaGuard{log: log, pool: pool, signal: signal, faults: make(chan error, 1)}
}

// reset forgets the fault an earlier Run or PollOnce met.
func (g *schemaGuard) reset() {
	select {
	case <-g.faults:
	default:
	}
	g.faulted.Store(false)
}

// check checks that this build runs on the database's schema (see
// corosql.CheckSchema): the schema is this build's, or a newer one that
// declares it compatible, which is logged. The error, if any, wraps the
// *sql.SchemaError.
func (g *schemaGuard) check(ctx context.Context, db tasks.DB) error {
	found, err := corosql.CheckSchema(ctx, db)
	if err != nil {
		return fmt.Errorf("executor: %w", err)
	}
	if build := corosql.BuildSchema(); found.Migration > build.Migration {
		g.log.Info("corotask: running on a newer schema that declares this build compatible",
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

// fault reports whether err is a schema fault (see isSchemaFault); if so,
// the executor claims and starts nothing more, and Run stops (see
// claimLoop). Such an error is never counted against a task: its claim is
// given back.
func (g *schemaGuard) fault(err error) bool {
	if !isSchemaFault(err) {
		return false
	}
	g.stop(err)
	return true
}

// stop makes the executor claim and start nothing more, and Run stop,
// because of err.
func (g *schemaGuard) stop(err error) {
	if !g.faulted.Swap(true) {
		g.log.Error("corotask: a statement of corotask failed on the database's schema; stopping", "error", err)
	}
	g.checked.Store(false)
	select {
	case g.faults <- err:
	default:
	}
	g.signal()
}

// stopErr is the error Run returns after the schema fault fault: the
// schema checked again (a *sql.SchemaError when it does not fit this build),
// else fault itself.
func (g *schemaGuard) stopErr(ctx context.Context, fault error) error {
	ctx = context.WithoutCancel(ctx)
	if err := g.check(ctx, g.pool); err != nil {
		var se *corosql.SchemaError
		if errors.As(err, &se) {
			g.log.Error("corotask: the database's schema does not fit this build", "error", err)
			return err
		}
	}
	return fmt.Errorf("executor: a statement of corotask failed on the database's schema: %w", fault)
}

// recheck checks the schema on a connection opened again (after a lost
// one: a restarted server, a failover); a schema that no longer fits stops
// the executor.
func (g *schemaGuard) recheck(ctx context.Context, db tasks.DB) error {
	err := g.check(ctx, db)
	var se *corosql.SchemaError
	if errors.As(err, &se) {
		g.stop(err)
	}
	return err
}
