package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/tasks"
)

// sendWarmup is how many sends each level makes before the timed ones
// (the connection's prepared statements, the row in cache).
const sendWarmup = 5

// runSend: the cost of one inbox.Send to a task with Levels messages
// already waiting. Each level has a fresh task of a type nothing polls
// (it stays ready, and its messages accumulate), filled to the level, then
// N sends, each its own autocommit statement on one connection, timed one
// by one.
func runSend(ctx context.Context, r *runner, res *Result) error {
	o := r.opts
	levels := slices.Compact(slices.Sorted(slices.Values(o.Levels)))
	res.param("levels", levels)
	res.param("sends", o.N)
	db, err := r.pool(ctx, 4)
	if err != nil {
		return err
	}
	defer db.Close()
	conn, err := r.conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	fill := r.newFiller(db)
	means := map[int]float64{}
	for _, level := range levels {
		id, err := tasks.Create(ctx, db, tasks.Spec{Type: unpolledType})
		if err != nil {
			return err
		}
		start := time.Now()
		if err := fill.fill(ctx, id, level); err != nil {
			return err
		}
		prefill := time.Since(start)
		for i := range sendWarmup {
			if err := inbox.Send(ctx, conn, id, tasks.ID{}, note{Seq: -1 - i}); err != nil {
				return err
			}
		}
		ds := make([]time.Duration, 0, o.N)
		for i := range o.N {
			t0 := time.Now()
			if err := inbox.Send(ctx, conn, id, tasks.ID{}, note{Seq: level + i}); err != nil {
				return err
			}
			ds = append(ds, time.Since(t0))
		}
		var rowBytes int64
		if err := db.QueryRow(ctx, "SELECT pg_column_size(t.*) FROM corotask.tasks t WHERE task_id = $1", id).Scan(&rowBytes); err != nil {
			return fmt.Errorf("size of task %s: %w", id, err)
		}
		m, p50, p99 := res.levelTimings(level, ds)
		means[level] = m
		r.progress("%d messages waiting: send mean %.3f ms, p50 %.3f ms, p99 %.3f ms (prefill %.1fs)",
			level, m, p50, p99, prefill.Seconds())
		label := fmt.Sprint(level)
		res.metric("prefill_sec_"+label, prefill.Seconds())
		res.metric("row_bytes_"+label, float64(rowBytes))
	}
	res.levelRatio("send_ratio", levels, means)
	res.note("*_ms_LEVEL: one inbox.Send (autocommit, one connection) to a task with LEVEL messages waiting, %d timed after %d untimed; send_ratio = mean at the highest level / mean at the lowest (0 by default)", o.N, sendWarmup)
	res.note("each level has a fresh task of a type nothing polls, filled by a filler task's poll (Task.Send, %d messages per commit); row_bytes is the task's row (pg_column_size) after the sends, its inbox included when the inbox is kept in the row", fillChunk)
	return nil
}
