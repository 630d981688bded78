package executor

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/internal/dberr"
	"github.com/corotask/corotask/tasks"
)

// env is what every part of an executor shares: who it is, its pool and
// configuration, its logger and hooks, the registered pollers, the schema
// guard, and the wake channel of the claim loop. New sets it; nothing in it
// is replaced afterwards (the pollers, the guard and the canceled polls
// guard what changes in them themselves).
type env struct {
	id       tasks.ID // see Executor.ID
	pool     *pgxpool.Pool
	cfg      Config
	log      *slog.Logger
	hooks    hookCaller
	pollers  *pollers
	schema   *schemaGuard
	canceled *canceledPolls
	// controlled is the types with flow controls, as the last claim found them.
	controlled *controlledTypes
	// distribution is whether the tasks are distributed by Citus.
	distribution *distribution
	// severedRetries bounds atOnce. Evaluated on first use: tests make
	// executors on pools that were never opened.
	severedRetries func() int
	wake           chan struct{} // a claim is worth trying: a NOTIFY, or a slot freed
	// laneWake is the priority lane's (see priorityLane): a NOTIFY of a
	// type polled, or a priority slot freed. Nil without PrioritySlots.
	laneWake chan struct{}
}

// signal asks the claim loop to try a claim now.
func (v *env) signal() {
	select {
	case v.wake <- struct{}{}:
	default:
	}
}

// signalLane asks the priority lane, if any, to try a claim now.
func (v *env) signalLane() {
	select {
	case v.laneWake <- struct{}{}:
	default:
	}
}

// atOnce reports whether a statement that failed with err, for the n-th time
// in a row with its connection severed (see dberr.Severed), is tried again
// at once on another connection rather than after a backoff: up to one more
// time than the pool has connections, so that a pool whose every idle
// connection was killed (a failover, a pooler's restart) is run through
// first.
func (v *env) atOnce(err error, n int) bool {
	return dberr.Severed(err) && n <= v.severedRetries()
}
