package ui

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

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
	err := db.QueryRow(ctx, `SELECT greatest(reltuples, 0) FROM pg_class WHERE oid = 'corotask.tasks'::regclass`).Scan(&n)
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
	const q = `WITH ` + served + ` SELECT t.task_type, ` + statusExpr + `, count(*)::float8 FROM served s, corotask.tasks t`
	const ofType = ` AND ($1 = '' OR t.task_type = $1) GROUP BY 1, 2`
	if pct == 0 {
		return collectCounts(ctx, db, q+` WHERE true`+ofType, 1, false, typ)
	}
	var waiting float64
	if err := db.QueryRow(ctx, `SELECT greatest(reltuples, 0) FROM pg_class
		WHERE oid = 'corotask.tasks_ready_idx'::regclass`).Scan(&waiting); err != nil {
		return nil, fmt.Errorf("count tasks: %w", err)
	}
	exact, sampled := condClaimed, `NOT `+condClaimed
	if waiting < exactWaitingLimit {
		exact, sampled = condIndexed, condUnindexed
	}
	out, err := collectCounts(ctx, db, q+` WHERE `+exact+ofType, 1, false, typ)
	if err != nil {
		return nil, err
	}
	more, err := collectCounts(ctx, db, q+` TABLESAMPLE SYSTEM ($2) WHERE `+sampled+ofType, 100/pct, true, typ, pct)
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
	sql := `SELECT t.task_type, least(11, floor(extract(epoch FROM now() - t.done_at) / 300))::int,
			count(*)::float8, (count(*) FILTER (WHERE t.outcome = 'failed'))::float8
		FROM corotask.tasks t`
	scale, args := 1.0, []any{}
	if pct > 0 {
		sql += ` TABLESAMPLE SYSTEM ($1)`
		scale, args = 100/pct, append(args, pct)
	}
	sql += ` WHERE t.done_at > now() - interval '1 hour' GROUP BY 1, 2`
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
	rows, err = db.Query(ctx, `SELECT t.task_type, count(*), extract(epoch FROM now() - min(t.wake_at))
		FROM corotask.tasks t
		WHERE t.claim IS NULL AND t.done_at IS NULL AND t.wake_at IS NOT NULL AND t.wake_at <= now()
		GROUP BY 1`)
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
