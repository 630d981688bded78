package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/tasks"
)

// bloatBacklog is how many created but not yet polled tasks the bloat
// feeder keeps at most.
const bloatBacklog = 5_000

// runBloat: N task lifecycles (CreateMany, claim, poll, commit Done,
// deletion by the executor's retention), with the table's size and dead
// tuples sampled every SampleEvery.
func runBloat(ctx context.Context, r *runner, res *Result) error {
	o := r.opts
	res.param("lifecycles", o.N)
	res.param("workers", o.Workers)
	res.param("retention", o.Retention)
	res.param("sample_every", o.SampleEvery)
	db, err := r.pool(ctx, 4)
	if err != nil {
		return err
	}
	defer db.Close()
	var first firstTime
	var polls atomic.Int64
	cfg := r.executorConfig(0)
	cfg.Retention = o.Retention
	cfg.RetentionInterval = time.Second
	grp, err := r.startExecutors(ctx, 1, o.Workers, cfg, func(e *executor.Executor) {
		executor.Register(e, oneshotType, oneshotPoller(&first, &polls), r.typeOptions()...)
	})
	if err != nil {
		return err
	}
	defer grp.cleanup()

	sample := func(start time.Time) (Fields, error) {
		var table, total, indexes, live, dead, autovacuums, vacuums, rows int64
		err := db.QueryRow(ctx, `SELECT pg_relation_size(relid), pg_total_relation_size(relid), pg_indexes_size(relid),
				n_live_tup, n_dead_tup, autovacuum_count, vacuum_count, (SELECT count(*) FROM corotask.tasks)
			FROM pg_stat_user_tables WHERE relid = 'corotask.tasks'::regclass`).
			Scan(&table, &total, &indexes, &live, &dead, &autovacuums, &vacuums, &rows)
		if err != nil {
			return nil, err
		}
		// The history table, deleted with its tasks by retention.
		var hTotal, hDead, hRows int64
		err = db.QueryRow(ctx, `SELECT pg_total_relation_size(relid), n_dead_tup, (SELECT count(*) FROM corotask.history)
			FROM pg_stat_user_tables WHERE relid = 'corotask.history'::regclass`).Scan(&hTotal, &hDead, &hRows)
		if err != nil {
			return nil, err
		}
		return Fields{
			{"t_sec", time.Since(start).Seconds()},
			{"lifecycles", polls.Load()},
			{"rows", rows},
			{"table_bytes", float64(table)},
			{"indexes_bytes", float64(indexes)},
			{"total_bytes", float64(total)},
			{"dead_tup", dead},
			{"autovacuums", autovacuums},
			{"vacuums", vacuums},
			{"history_rows", hRows},
			{"history_total_bytes", float64(hTotal)},
			{"history_dead_tup", hDead},
		}, nil
	}

	r.progress("%d lifecycles, sampling every %s", o.N, o.SampleEvery)
	start := time.Now()
	s0, err := sample(start)
	if err != nil {
		return err
	}
	res.Series = append(res.Series, s0)
	g, gctx := errgroup.WithContext(ctx)
	fed := make(chan struct{})
	g.Go(func() error { // the feeder
		defer close(fed)
		created := 0
		batch := make([]tasks.Spec, 0, o.Batch)
		for created < o.N {
			if created-int(polls.Load()) >= bloatBacklog {
				t := time.NewTimer(5 * time.Millisecond)
				select {
				case <-gctx.Done():
					t.Stop()
					return gctx.Err()
				case <-t.C:
				}
				continue
			}
			batch = batch[:0]
			for range min(o.Batch, o.N-created) {
				batch = append(batch, tasks.Spec{Type: oneshotType})
			}
			if _, err := tasks.CreateMany(gctx, db, batch); err != nil {
				return err
			}
			created += len(batch)
		}
		return nil
	})
	g.Go(func() error { // the sampler
		t := time.NewTicker(o.SampleEvery)
		defer t.Stop()
		for {
			select {
			case <-gctx.Done():
				return nil
			case <-t.C:
			}
			s, err := sample(start)
			if err != nil {
				if gctx.Err() != nil {
					return nil
				}
				return err
			}
			res.Series = append(res.Series, s)
			r.progress("%s", fmt.Sprintf("%5.0fs %9d lifecycles, table %s, total %s, %d dead tuples; history %s, %d rows", s.Float("t_sec"),
				polls.Load(), bytesize(s.Float("table_bytes")), bytesize(s.Float("total_bytes")), int64(s.Float("dead_tup")),
				bytesize(s.Float("history_total_bytes")), int64(s.Float("history_rows"))))
			if polls.Load() >= int64(o.N) {
				return nil
			}
		}
	})
	g.Go(func() error { // the end: all created, polled and committed
		select {
		case <-fed:
		case <-gctx.Done():
			return nil
		}
		return waitUntil(gctx, "every task done", time.Hour, 100*time.Millisecond, func() (bool, error) {
			if polls.Load() < int64(o.N) {
				return false, nil
			}
			left, err := anyLive(gctx, db)
			return !left, err
		})
	})
	err = g.Wait()
	elapsed := time.Since(start)
	if err != nil {
		return err
	}
	// Let retention delete the last ones.
	_ = waitUntil(ctx, "retention", o.Retention+10*time.Second, 250*time.Millisecond, func() (bool, error) {
		var n int
		err := db.QueryRow(ctx, "SELECT count(*) FROM corotask.tasks").Scan(&n)
		return n == 0, err
	})
	final, err := sample(start)
	if err != nil {
		return err
	}
	res.Series = append(res.Series, final)
	if err := grp.stop(); err != nil {
		return err
	}

	res.metric("lifecycles", polls.Load())
	res.metric("sec", elapsed.Seconds())
	res.metric("lifecycles_per_sec", rate(int(polls.Load()), elapsed))
	var maxTable, maxTotal, maxDead, maxHistory, maxHistoryRows float64
	var firstHalf, secondHalf, historyFirst, historySecond float64
	n := len(res.Series)
	for i, s := range res.Series {
		maxTable = max(maxTable, s.Float("table_bytes"))
		maxTotal = max(maxTotal, s.Float("total_bytes"))
		maxDead = max(maxDead, s.Float("dead_tup"))
		maxHistory = max(maxHistory, s.Float("history_total_bytes"))
		maxHistoryRows = max(maxHistoryRows, s.Float("history_rows"))
		if i == n-1 {
			continue // after the run
		}
		if i < n/2 {
			firstHalf = max(firstHalf, s.Float("total_bytes"))
			historyFirst = max(historyFirst, s.Float("history_total_bytes"))
		} else {
			secondHalf = max(secondHalf, s.Float("total_bytes"))
			historySecond = max(historySecond, s.Float("history_total_bytes"))
		}
	}
	res.metric("table_bytes_max", maxTable)
	res.metric("total_bytes_max", maxTotal)
	res.metric("total_bytes_final", final.Float("total_bytes"))
	res.metric("dead_tup_max", maxDead)
	res.metric("autovacuums", final.Get("autovacuums"))
	res.metric("vacuums", final.Get("vacuums"))
	if firstHalf > 0 {
		growth := secondHalf / firstHalf
		res.metric("growth_second_half_vs_first", growth)
		verdict := "bounded"
		if growth > 1.5 {
			verdict = "GROWING"
		}
		res.note("size: %s (the largest total size in the second half of the run is %.2fx that of the first half)", verdict, growth)
	}
	res.metric("history_total_bytes_max", maxHistory)
	res.metric("history_rows_max", maxHistoryRows)
	res.metric("history_total_bytes_final", final.Float("history_total_bytes"))
	res.metric("history_rows_final", final.Float("history_rows"))
	if historyFirst > 0 {
		growth := historySecond / historyFirst
		res.metric("history_growth_second_half_vs_first", growth)
		verdict := "bounded"
		if growth > 1.5 {
			verdict = "GROWING"
		}
		res.note("history size: %s (%.2fx from the first half of the run to the second); retention deletes a task's history with it", verdict, growth)
	}
	res.note("retention deletes ended tasks after -retention, every second; total_bytes is the table, its indexes and TOAST; vacuums are VACUUMs not run by autovacuum (e.g. the executor's own, when the server's autovacuum is off)")
	return nil
}
