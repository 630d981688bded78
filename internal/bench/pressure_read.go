package bench

import (
	"context"
	"time"
)

// pressureTask is what the pressure scenario reads back of one task.
type pressureTask struct {
	seq       int64
	created   time.Time
	done      time.Time // zero while not done (or ended otherwise)
	ended     bool      // done, failed or canceled
	pollStart time.Time // of the poll that ended it; zero if none did
	attempts  int
}

// readPressureTasks reads every task of the scenario, on a session of its
// own (the pools' sessions may have been terminated).
func readPressureTasks(ctx context.Context, r *runner) ([]pressureTask, error) {
	conn, err := r.conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `SELECT (inner_state->>'seq')::bigint, created_at, CASE WHEN outcome = 'done' THEN done_at END,
			outcome IS NOT NULL, (result->>'poll_start_us')::bigint, attempts
		FROM corotask.tasks WHERE task_type = $1`, string(pressureType))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []pressureTask
	for rows.Next() {
		var (
			t     pressureTask
			done  *time.Time
			start *int64
		)
		if err := rows.Scan(&t.seq, &t.created, &done, &t.ended, &start, &t.attempts); err != nil {
			return nil, err
		}
		if done != nil {
			t.done = *done
		}
		if start != nil {
			t.pollStart = time.UnixMicro(*start)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// addHistoryOutcomes adds the number of polls recorded in corotask.history
// per outcome (committed, claim_lost, taken_over, released, failed...),
// with history on.
func addHistoryOutcomes(ctx context.Context, r *runner, res *Result) error {
	if r.opts.History == "off" {
		return nil
	}
	conn, err := r.conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, "SELECT outcome, count(*) FROM corotask.history GROUP BY outcome ORDER BY count(*) DESC")
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var outcome string
		var n int64
		if err := rows.Scan(&outcome, &n); err != nil {
			return err
		}
		res.metric("history_"+outcome, n)
	}
	return rows.Err()
}
