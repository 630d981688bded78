package tasks

import (
	"context"
	"fmt"
	"time"

	"github.com/corotask/corotask/internal/dberr"
	"github.com/corotask/corotask/internal/query"
	"github.com/jackc/pgx/v5"
)

// Executor is an executor registered in the database: each running
// executor refreshes its record about every heartbeat interval, and marks it
// stopped when it stops gracefully. Records are deleted once they have
// expired for the executors' retention (that of ended tasks, 7 days by
// default), so that task histories can name the executors that ran them.
type Executor struct {
	ID          ID
	Host        string
	PID         int
	Version     string // corotask's version in the executor's binary
	Types       []Type // the task types it serves
	Concurrency int
	StartedAt   time.Time
	LastSeen    time.Time
	// ExpiresAt is when the record stops counting unless refreshed; past
	// it, an executor that did not stop is Stale: it died or stalled.
	ExpiresAt time.Time
	Stale     bool
	// StoppedAt is when the executor stopped gracefully; nil while it runs
	// (or if it died).
	StoppedAt *time.Time
	// Claims is how many tasks it holds a claim on now.
	Claims int
}

// Executors returns the registered executors, the oldest first.
func Executors(ctx context.Context, db DB) ([]Executor, error) {
	rows, err := db.Query(ctx, query.Executors)
	if err != nil {
		return nil, fmt.Errorf("list executors: %w", dberr.Translate(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Executor, error) {
		var x Executor
		var types []string
		err := r.Scan(&x.ID, &x.Host, &x.PID, &x.Version, &types, &x.Concurrency, &x.StartedAt, &x.LastSeen,
			&x.ExpiresAt, &x.Stale, &x.StoppedAt, &x.Claims)
		for _, t := range types {
			x.Types = append(x.Types, Type(t))
		}
		return x, err
	})
	if err != nil {
		return nil, fmt.Errorf("list executors: %w", dberr.Translate(err))
	}
	return out, nil
}
