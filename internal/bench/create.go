package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/corotask/corotask/tasks"
)

// runCreate: N tasks created with CreateMany, Batch per call, by Writers
// concurrent callers; tasks/s. With Keys "on" each task has a key of its
// own, "k-<n>" for the n-th task, so every row also enters the key's index
// and the create checks that no live task of the type holds the key.
func runCreate(ctx context.Context, r *runner, res *Result) error {
	o := r.opts
	res.param("n", o.N)
	res.param("batch", o.Batch)
	res.param("writers", o.Writers)
	keyed := o.Keys == "on"
	db, err := r.pool(ctx, o.Writers+1)
	if err != nil {
		return err
	}
	defer db.Close()
	wal0, err := walLSN(ctx, db)
	if err != nil {
		return err
	}
	r.progress("creating %d tasks in batches of %d, %d writer(s), keys %s", o.N, o.Batch, o.Writers, o.Keys)
	var (
		left  atomic.Int64
		calls []time.Duration
		lat   = make([][]time.Duration, o.Writers)
	)
	left.Store(int64(o.N))
	cpu0 := sampleCPU(ctx, db)
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	for w := range o.Writers {
		g.Go(func() error {
			batch := make([]tasks.Spec, 0, o.Batch)
			for {
				// This call takes tasks [hi-n, hi) of those left.
				hi := left.Add(-int64(o.Batch)) + int64(o.Batch)
				n := min(int64(o.Batch), hi)
				if n <= 0 {
					return nil
				}
				batch = batch[:0]
				for i := hi - n; i < hi; i++ {
					spec := tasks.Spec{Type: oneshotType}
					if keyed {
						spec.Key = "k-" + strconv.FormatInt(i, 10)
					}
					batch = append(batch, spec)
				}
				t := time.Now()
				if _, err := tasks.CreateMany(gctx, db, batch); err != nil {
					return err
				}
				lat[w] = append(lat[w], time.Since(t))
			}
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	elapsed := time.Since(start)
	cpu1 := sampleCPU(ctx, db)
	for _, l := range lat {
		calls = append(calls, l...)
	}
	wal1, err := walLSN(ctx, db)
	if err != nil {
		return err
	}
	var n, withKey int
	if err := db.QueryRow(ctx, "SELECT count(*), count(task_key) FROM corotask.tasks").Scan(&n, &withKey); err != nil {
		return err
	}
	if n != o.N {
		return fmt.Errorf("%d tasks created, want %d", n, o.N)
	}
	want := 0
	if keyed {
		want = n
	}
	if withKey != want {
		return fmt.Errorf("%d tasks created with a key, want %d", withKey, want)
	}
	res.metric("tasks", n)
	res.metric("sec", elapsed.Seconds())
	res.metric("tasks_per_sec", rate(n, elapsed))
	p := percentiles(calls, 50, 99)
	res.metric("call_p50_ms", p[0])
	res.metric("call_p99_ms", p[1])
	res.metric("wal_bytes_per_task", float64(wal1-wal0)/float64(n))
	u := cpu0.until(cpu1)
	if u.pgOK {
		res.metric("postgres_cpu_us_per_task", float64(u.postgres.Microseconds())/float64(n))
	}
	if u.ok {
		res.metric("client_cpu_us_per_task", float64(u.self.Microseconds())/float64(n))
		res.metric("machine_cpu_busy_pct", 100*u.busy)
	}
	return nil
}
