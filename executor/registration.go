package executor

import (
	"context"
	"os"
	"runtime/debug"
	"slices"
	"time"

	"github.com/corotask/corotask/internal/dberr"
	"github.com/corotask/corotask/tasks"
)

// module is this module's path, to find its version in a binary's build info.
const module = "github.com/corotask/corotask"

// executorTTL is how long an executor's row in corotask.executors stays live
// without a refresh, in heartbeat timeouts: a few missed refreshes are
// forgiven, a dead executor stops counting soon after its claims expire.
const executorTTL = 3

// ID returns the executor's ID: the claims it holds record it in
// corotask.tasks.claimed_by and the history of the tasks it polls in
// corotask.history.executor_id; once it runs, corotask.executors has its
// row under it.
func (e *Executor) ID() tasks.ID { return e.id }

// seen inserts or refreshes the executor's row in corotask.executors.
func (e *Executor) seen(ctx context.Context) error {
	host, _ := os.Hostname()
	types := e.Types()
	names := make([]string, len(types))
	for i, t := range types {
		names[i] = string(t)
	}
	slices.Sort(names)
	// Registrations are kept as long as ended tasks, whose history names
	// their executors.
	var keep *time.Duration
	if e.cfg.Retention >= 0 {
		keep = &e.cfg.Retention
	}
	_, err := e.pool.Exec(ctx, `SELECT corotask.executor_seen($1, $2, $3, $4, $5, $6, $7, $8)`,
		e.id, host, os.Getpid(), moduleVersion(), names, e.cfg.Concurrency, executorTTL*e.cfg.HeartbeatTimeout, keep)
	return dberr.Translate(err)
}

// announce refreshes the executor's row every HeartbeatInterval until ctx
// ends: one statement per interval.
func (e *Executor) announce(ctx context.Context) {
	every(ctx, e.cfg.HeartbeatInterval, func(ctx context.Context) bool {
		if err := e.seen(ctx); err != nil && ctx.Err() == nil {
			e.log.Warn("corotask: refresh this executor's registration", "error", err)
		}
		return true
	})
}

// deregister marks the executor's row stopped, at the end of a graceful
// stop: its types are no longer served by it. The row stays (see seen).
func (e *Executor) deregister() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := e.pool.Exec(ctx, `SELECT corotask.executor_stopped($1)`, e.id); err != nil {
		e.log.Warn("corotask: remove this executor's registration", "error", dberr.Translate(err))
	}
}

// moduleVersion is corotask's version in this binary: the module's version
// when it is a dependency or was installed with go install, else "(devel)".
func moduleVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	if bi.Main.Path == module && bi.Main.Version != "" {
		return bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == module {
			return d.Version
		}
	}
	return "(devel)"
}
