package executor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/corotask/corotask/internal/query"
)

// vacuumInterval is how often an executor checks whether corotask's tables
// need vacuuming (only when the server's autovacuum is off).
const vacuumInterval = 10 * time.Second

// vacuumLockKey serializes vacuuming between executors ("corovac").
const vacuumLockKey = 0x636f726f766163

// vacuumer vacuums corotask's tables in its own goroutine (a service of
// Run's, unless Config.DisableVacuum); it owns nothing, and an advisory
// lock keeps executors from vacuuming together.
type vacuumer struct{ *env }

// run keeps corotask's tables from bloating on servers
// whose autovacuum is off: every claim and commit leaves a dead row version
// and dead index entries behind, and claims slow down as they scan past
// them; retention and the cap on each task's history delete history rows.
func (v vacuumer) run(ctx context.Context) {
	every(ctx, vacuumInterval, func(ctx context.Context) bool {
		done, err := v.vacuumIfNeeded(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "42501" {
				v.log.Warn("corotask: autovacuum is off and this role may not vacuum corotask.tasks; vacuum it by other means or set Config.DisableVacuum", "error", err)
				return false
			}
			v.log.Warn("corotask: vacuum", "error", err)
		case done:
			v.log.Debug("corotask: vacuumed corotask's tables (autovacuum is off)")
		}
		return true
	})
}

// vacuumed are the tables VacuumIfNeeded looks after: the tasks, their
// history, whose rows retention and the per-task cap delete, and their
// messages, deleted as polls pop them.
var vacuumed = []string{"corotask.tasks", "corotask.history", "corotask.messages"}

// VacuumIfNeeded vacuums corotask.tasks, corotask.history and
// corotask.messages when the
// server's autovacuum is off and dead rows make up more than a tenth of the
// table (and at least 1,000), and reports whether it vacuumed either. At
// most one executor vacuums at a time. Run calls it every 10 seconds unless
// Config.DisableVacuum is set.
func (e *Executor) VacuumIfNeeded(ctx context.Context) (bool, error) {
	return vacuumer{e.env}.vacuumIfNeeded(ctx)
}

// vacuumIfNeeded is VacuumIfNeeded.
func (v vacuumer) vacuumIfNeeded(ctx context.Context) (bool, error) {
	conn, err := v.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Release()
	var needed []string
	for _, table := range vacuumed {
		var need bool
		err = conn.QueryRow(ctx, query.VacuumNeeded, table).Scan(&need)
		if err != nil {
			return false, err
		}
		if need {
			needed = append(needed, table)
		}
	}
	if len(needed) == 0 {
		return false, nil
	}
	var locked bool
	if err := conn.QueryRow(ctx, query.VacuumLock, int64(vacuumLockKey)).Scan(&locked); err != nil || !locked {
		return false, err
	}
	defer conn.Exec(context.WithoutCancel(ctx), query.VacuumUnlock, int64(vacuumLockKey)) //nolint:errcheck
	for _, table := range needed {
		if _, err := conn.Exec(ctx, query.VacuumAnalyze+table); err != nil {
			return false, fmt.Errorf("vacuum %s: %w", table, err)
		}
	}
	return true, nil
}
