package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// releaseFunc ends a pressure and records its own figures in res.
type releaseFunc func(res *Result)

// startPressureMode starts the pressure of Options.Mode; the returned
// function ends it ("the release").
func startPressureMode(ctx context.Context, r *runner, ctl *pgxpool.Pool, x *pressureExecutors, ph phases) (releaseFunc, error) {
	switch r.opts.Mode {
	case "killbackends":
		return startKiller(ctx, r)
	case "idletx":
		return startIdleTx(ctx, r)
	case "readers":
		return startReaders(ctx, r)
	case "stop":
		return startStops(ctx, r, ctl, x, ph), nil
	}
	return func(*Result) {}, nil
}

// background runs f in a goroutine until the release, and returns the
// function that cancels it and waits for it to return.
func background(ctx context.Context, f func(ctx context.Context)) func() {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); f(ctx) }()
	return func() { cancel(); wg.Wait() }
}

// startKiller terminates every other session of the scenario's database
// (the executors', the producer's, the backlog sampler's) KillRate times a
// second, from a session of its own: the first round at once.
func startKiller(ctx context.Context, r *runner) (releaseFunc, error) {
	conn, err := r.conn(ctx)
	if err != nil {
		return nil, err
	}
	var rounds, killed, failed int64
	stop := background(ctx, func(ctx context.Context) {
		tick := time.NewTicker(time.Duration(float64(time.Second) / r.opts.KillRate))
		defer tick.Stop()
		for {
			var n int64
			err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&n)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				failed++
			} else {
				rounds++
				killed += n
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	return func(res *Result) {
		stop()
		conn.Close(context.WithoutCancel(ctx))
		res.metric("kill_rounds", rounds)
		res.metric("backends_killed", killed)
		if failed > 0 {
			res.metric("kill_rounds_failed", failed)
		}
	}, nil
}

// startIdleTx opens a transaction that holds a transaction ID
// (txid_current) and stays idle until the release, which commits it: the
// xmin horizon of the whole server stays where it was meanwhile.
func startIdleTx(ctx context.Context, r *runner) (releaseFunc, error) {
	conn, err := r.conn(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := conn.Begin(ctx)
	if err == nil {
		var xid int64
		err = tx.QueryRow(ctx, "SELECT txid_current()").Scan(&xid)
	}
	if err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	held := time.Now()
	return func(res *Result) {
		cctx := context.WithoutCancel(ctx)
		if err := tx.Commit(cctx); err != nil {
			res.note("idletx: the commit of the idle transaction failed: %v", err)
		}
		conn.Close(cctx)
		res.metric("idle_tx_held_sec", time.Since(held).Seconds())
	}, nil
}

// startReaders runs Readers sessions that each scan the tasks table in
// REPEATABLE READ transactions, back to back, until the release.
func startReaders(ctx context.Context, r *runner) (releaseFunc, error) {
	var scans, failed atomic.Int64
	var stops []func()
	var conns []*pgx.Conn
	end := func() {
		for _, s := range stops {
			s()
		}
		for _, c := range conns {
			c.Close(context.WithoutCancel(ctx))
		}
	}
	for range r.opts.Readers {
		conn, err := r.conn(ctx)
		if err != nil {
			end()
			return nil, err
		}
		conns = append(conns, conn)
		stops = append(stops, background(ctx, func(ctx context.Context) {
			for ctx.Err() == nil {
				err := pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
					var n, size *int64
					return tx.QueryRow(ctx, "SELECT count(*), sum(length(inner_state::text)) FROM corotask.tasks").Scan(&n, &size)
				})
				switch {
				case err == nil:
					scans.Add(1)
				case ctx.Err() == nil:
					failed.Add(1)
					if conn.IsClosed() {
						return
					}
				}
			}
		}))
	}
	return func(res *Result) {
		end()
		res.metric("reader_scans", scans.Load())
		if n := failed.Load(); n > 0 {
			res.metric("reader_scans_failed", n)
		}
	}, nil
}
