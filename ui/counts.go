package ui

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/tasks"
)

// count is how many tasks of a type are in a status.
type count struct {
	Type, Status string
	N            int64
	// Estimated: N is scaled up from a sample of the table.
	Estimated bool
}

// sampleRows is about how many rows an estimate reads.
const sampleRows = 20000

// tableRows returns the planner's estimate of the rows of corotask.tasks.
func tableRows(ctx context.Context, db tasks.DB) (float64, error) {
	var n float64
	err := db.QueryRow(ctx, query.UICountsEstimate).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("table size: %w", err)
	}
	return n, nil
}

// samplePercent returns the share of the table's blocks (in percent) an
// estimate reads, or 0 when the table is small enough (below threshold rows)
// to count exactly.
func samplePercent(rows float64, threshold int) float64 {
	if threshold < 0 || rows < float64(threshold) || rows == 0 {
		return 0
	}
	return min(100, 100*sampleRows/rows)
}

// exactWaitingLimit is the most tasks waiting for a time (the entries of
// the claim's index of ready and sleeping tasks) that countTasks counts
// exactly on a table that is sampled: past it, reading them all costs about
// as much as reading the table.
const exactWaitingLimit = 10000

// countTasks returns how many tasks there are of each type (only typ, when
// given) in each status. With pct 0 every task is counted exactly. Else
// running tasks are counted exactly (their index holds only them, as many as
// the executors run), so are the tasks waiting for a time while there are
// fewer than exactWaitingLimit of them, and the others are estimated from a
// pct% block sample of the table.
func countTasks(ctx context.Context, db tasks.DB, typ string, pct float64) ([]count, error) {
	if pct == 0 {
		return collectCounts(ctx, db, query.UICountsAll, 1, false, typ)
	}
	var waiting float64
	if err := db.QueryRow(ctx, query.UICountsWaitingEstimate).Scan(&waiting); err != nil {
		return nil, fmt.Errorf("count tasks: %w", err)
	}
	exact, sampled := query.UICountsClaimed, query.UICountsSampledUnclaimed
	if waiting < exactWaitingLimit {
		exact, sampled = query.UICountsIndexed, query.UICountsSampledUnindexed
	}
	out, err := collectCounts(ctx, db, exact, 1, false, typ)
	if err != nil {
		return nil, err
	}
	more, err := collectCounts(ctx, db, sampled, 100/pct, true, typ, pct)
	if err != nil {
		return nil, err
	}
	return append(out, more...), nil
}

func collectCounts(ctx context.Context, db tasks.DB, sql string, scale float64, estimated bool, args ...any) ([]count, error) {
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("count tasks: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (count, error) {
		var c count
		var n float64
		err := r.Scan(&c.Type, &c.Status, &n)
		c.N, c.Estimated = int64(n*scale+0.5), estimated
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("count tasks: %w", err)
	}
	return out, nil
}

// typeActivity is what the overview shows of a type over the last hour.
type typeActivity struct {
	Type string
	// Ended and Failed in the last hour, and Buckets: ended per 5 minutes,
	// the oldest first.
	Ended, Failed int64
	Buckets       [12]int64
	Estimated     bool
	// Ready is how many tasks are ready now, and Lag how long the oldest of
	// them has waited.
	Ready int64
	Lag   time.Duration
}

// activity returns the throughput and lag of each type. Throughput is
// counted from ended tasks (exactly below pct 0, else from a pct% sample);
// lag from the ready tasks, exactly, through the claim's index.
func activity(ctx context.Context, db tasks.DB, pct float64) (map[string]*typeActivity, error) {
	out := make(map[string]*typeActivity)
	get := func(typ string) *typeActivity {
		a := out[typ]
		if a == nil {
			a = &typeActivity{Type: typ}
			out[typ] = a
		}
		return a
	}
	sql, scale, args := query.UIThroughput, 1.0, []any{}
	if pct > 0 {
		sql, scale, args = query.UIThroughputSampled, 100/pct, append(args, pct)
	}
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("throughput: %w", err)
	}
	var typ string
	var bucket int
	var ended, failed float64
	_, err = pgx.ForEachRow(rows, []any{&typ, &bucket, &ended, &failed}, func() error {
		a := get(typ)
		n := int64(ended*scale + 0.5)
		a.Ended += n
		a.Failed += int64(failed*scale + 0.5)
		a.Buckets[11-max(0, min(bucket, 11))] += n
		a.Estimated = pct > 0
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("throughput: %w", err)
	}
	rows, err = db.Query(ctx, query.ReadyByType)
	if err != nil {
		return nil, fmt.Errorf("lag: %w", err)
	}
	var ready int64
	var lag float64
	_, err = pgx.ForEachRow(rows, []any{&typ, &ready, &lag}, func() error {
		a := get(typ)
		a.Ready, a.Lag = ready, time.Duration(lag*float64(time.Second))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lag: %w", err)
	}
	return out, nil
}
