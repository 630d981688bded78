package executor

import (
	"context"
	"os"
	"runtime/debug"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/internal/dberr"
	"github.com/corotask/corotask/internal/query"
)

// module is this module's path, to find its version in a binary's build info.
const module = "github.com/corotask/corotask"

// executorTTL is how long an executor's row in corotask.executors stays live
// without a refresh, in heartbeat timeouts: a few missed refreshes are
// forgiven, a dead executor stops counting soon after its claims expire.
const executorTTL = 3

// registration keeps the executor's row in corotask.executors: inserted
// as Run starts (seen), refreshed every HeartbeatInterval by its goroutine
// (run, a service of Run's), marked stopped as that service stops.
type registration struct{ *env }

// seen inserts or refreshes the executor's row in corotask.executors.
func (r registration) seen(ctx context.Context) error {
	host, _ := os.Hostname()
	types := r.pollers.types()
	names := make([]string, len(types))
	for i, t := range types {
		names[i] = string(t)
	}
	slices.Sort(names)
	// Registrations are kept as long as ended tasks, whose history names
	// their executors.
	var keep *time.Duration
	if r.cfg.Retention >= 0 {
		keep = &r.cfg.Retention
	}
	// Its concurrency is the most polls it runs at once, its priority
	// slots included.
	_, err := r.pool.Exec(ctx, query.RegistrySeen, pgx.NamedArgs{
		"executor": r.id, "host": host, "pid": os.Getpid(), "version": moduleVersion(), "types": names,
		"concurrency": r.cfg.Concurrency + r.cfg.PrioritySlots, "expires_in": executorTTL * r.cfg.HeartbeatTimeout, "keep": keep,
	})
	return dberr.Translate(err)
}

// run refreshes the executor's row every HeartbeatInterval until ctx
// ends (one statement per interval), then marks it stopped.
func (r registration) run(ctx context.Context) {
	defer r.deregister()
	every(ctx, r.cfg.HeartbeatInterval, func(ctx context.Context) bool {
		if err := r.seen(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("corotask: refresh this executor's registration", "error", err)
		}
		return true
	})
}

// deregister marks the executor's row stopped, as a graceful stop ends: its types are no longer served by it. The row stays (see seen).
func (r registration) deregister() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := r.pool.Exec(ctx, query.RegistryStopped, r.id); err != nil {
		r.log.Warn("corotask: remove this executor's registration", "error", dberr.Translate(err))
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
