package executor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/internal/dberr"
	corosql "github.com/corotask/corotask/sql"
)

// Run claims and polls tasks until ctx ends, then stops gracefully: it claims
// no more, lets in-flight polls finish for up to Config.ShutdownTimeout, then
// cancels those left (with cause ErrShutdown) and releases their claims so
// another executor can take the tasks at once. Transient database errors
// (lost connections, a restarting server) are logged and retried; Run returns
// an error when it cannot start, and when the database's schema does not fit
// this build.
//
// Run checks the schema first (see sql.CheckSchema): on a database that has
// no corotask schema, or one older or newer than this build runs on, it
// claims nothing and returns the *sql.SchemaError, which says what was found,
// what is needed and what to do. It checks again when the heartbeat's
// connection is opened again and after failed claims; and a statement of
// corotask's own that fails with an error of class 42 (an undefined function,
// table or column, a permission denied) is never counted against the task:
// its claim is given back, and Run stops gracefully and returns the error
// (the *sql.SchemaError when the schema no longer fits).
func (e *Executor) Run(ctx context.Context) error {
	v := e.env
	v.distribution.begin()
	defer v.distribution.end()
	if err := checkPooler(ctx, v); err != nil {
		return err
	}
	if err := v.pollers.begin(func() error { return checkQueryExecMode(v.pool) }); err != nil {
		return err
	}
	if err := e.startChecked(ctx); err != nil {
		v.pollers.end()
		var se *corosql.SchemaError
		if ctx.Err() != nil && !errors.As(err, &se) {
			return nil // stopped before it started: nothing claimed
		}
		return err
	}
	v.log.Info("corotask: executor starting", "types", len(v.pollers.types()), "concurrency", v.cfg.Concurrency)
	if v.cfg.HeartbeatInterval > v.cfg.HeartbeatTimeout/2 {
		v.log.Warn("corotask: HeartbeatInterval is over half of HeartbeatTimeout: one failed renewal expires every claim",
			"heartbeat_interval", v.cfg.HeartbeatInterval, "heartbeat_timeout", v.cfg.HeartbeatTimeout)
	}

	// Registered before the first claim, so that the tasks it serves are
	// not reported unserved; a failure is retried at the next refresh.
	if err := (registration{v}).seen(ctx); err != nil {
		v.log.Warn("corotask: register this executor", "error", err)
	}

	// Polls and services outlive ctx: they are stopped by the shutdown
	// sequence below, not by ctx itself. A poll's context is canceled
	// through its own cancel function (see polls.drain), so its parent is
	// not cancelable: a cancelable one would keep every poll's context in a
	// map under one lock, for nothing.
	e.slots.open(context.WithoutCancel(ctx))
	svcs := startServices(ctx, e.services())
	e.committer.open(svcs.ctx)

	if !v.cfg.DisableListen {
		// Claim only once notifications will be heard (or after a while
		// regardless: the fallback poll covers a LISTEN that cannot connect).
		t := time.NewTimer(5 * v.cfg.PollInterval)
		select {
		case <-e.listener.ready:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	stopLane := e.startPriorityLane(ctx)
	stopErr := e.claimLoop(ctx)
	stopLane()
	e.polls.stop()
	v.log.Info("corotask: executor stopping", "in_flight", e.slots.count())
	e.polls.drain(v.cfg.ShutdownTimeout)
	svcs.stop()
	v.canceled.flush()
	v.pollers.end()
	v.log.Info("corotask: executor stopped")
	return stopErr
}

// services are Run's background loops, in the order they start.
func (e *Executor) services() []service {
	v := e.env
	list := []service{e.beats, registration{v}}
	for range committers {
		list = append(list, e.committer)
	}
	if !v.cfg.DisableListen {
		list = append(list, e.listener)
	}
	if v.cfg.Retention > 0 {
		list = append(list, retention{v})
	}
	if !v.cfg.DisableVacuum {
		list = append(list, vacuumer{v})
	}
	return list
}

// startChecked checks the schema as Run starts, after any fault an earlier
// Run or PollOnce left, and whether Citus distributes the tasks (see
// distribution). A database that cannot be reached yet (restarting,
// failing over, behind a pooler whose logins fail) is waited for, as the
// claim loop waits for it later: a process started during an outage is not
// an error. A schema that does not fit, or any other answer, is returned.
func (e *Executor) startChecked(ctx context.Context) error {
	v := e.env
	v.schema.reset()
	for attempt := 1; ; attempt++ {
		err := v.schema.check(ctx, v.pool)
		if err == nil {
			err = v.distribution.detect(ctx, v.pool)
			e.beats.keeper.SetDistributed(v.distribution.citus.Load())
		}
		if err == nil || ctx.Err() != nil || !dberr.Unreachable(err) {
			return err
		}
		d := backoff(100*time.Millisecond, 5*time.Second, attempt)
		if attempt == 1 {
			v.log.Warn("corotask: cannot reach the database to check its schema; waiting for it", "error", err)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// checkQueryExecMode refuses pools whose queries do not learn their
// parameter types from the server: corotask passes arrays of IDs and of JSON,
// whose SQL types pgx cannot guess from their Go types.
func checkQueryExecMode(pool *pgxpool.Pool) error {
	name := map[pgx.QueryExecMode]string{pgx.QueryExecModeExec: "exec", pgx.QueryExecModeSimpleProtocol: "simple_protocol"}
	if m, ok := name[pool.Config().ConnConfig.DefaultQueryExecMode]; ok {
		return fmt.Errorf("executor: the pool's default_query_exec_mode %s is not supported; use cache_statement (the default), cache_describe or describe_exec", m)
	}
	return nil
}
