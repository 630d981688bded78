// Command riverbench is River's side of the oneshot comparison in
// docs/benchmarks.md: N jobs inserted in bulk, then worked once each by one
// River client with -workers workers on a pool of -pool connections; jobs/s
// from the start of the first job to the last job's finalized_at, as
// `corotask bench oneshot` measures tasks/s.
//
// It is a module of its own, so that River is not a dependency of corotask:
//
//	cd internal/bench/riverbench && go run . -database-url postgres://postgres@127.0.0.1:5432/postgres
//
// It creates a database of its own on the server, migrates River into it,
// and drops it at the end.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

type noopArgs struct{}

func (noopArgs) Kind() string { return "bench.oneshot" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	first *firstTime
	n     *atomic.Int64
}

func (w *noopWorker) Work(ctx context.Context, job *river.Job[noopArgs]) error {
	if w.n.Add(1) == 1 {
		w.first.see(time.Now())
	}
	return nil
}

type firstTime struct {
	mu sync.Mutex
	t  time.Time
}

func (f *firstTime) see(t time.Time) {
	f.mu.Lock()
	if f.t.IsZero() || t.Before(f.t) {
		f.t = t
	}
	f.mu.Unlock()
}

func main() {
	url := flag.String("database-url", os.Getenv("DATABASE_URL"), "server to run on (any database of it)")
	n := flag.Int("n", 50_000, "jobs")
	workers := flag.Int("workers", 100, "River MaxWorkers of the queue")
	poolSize := flag.Int("pool", 20, "connections of the client's pool")
	batch := flag.Int("batch", 1_000, "jobs per InsertMany")
	cooldown := flag.Duration("fetch-cooldown", 0, "River FetchCooldown (0: River's default, 100ms)")
	pollInterval := flag.Duration("fetch-poll-interval", 0, "River FetchPollInterval (0: River's default, 1s)")
	asJSON := flag.Bool("json", false, "print one JSON object")
	flag.Parse()
	if err := run(context.Background(), *url, *n, *workers, *poolSize, *batch, *cooldown, *pollInterval, *asJSON); err != nil {
		fmt.Fprintln(os.Stderr, "riverbench:", err)
		os.Exit(1)
	}
}

func withDatabase(url, name string) string {
	base, query, _ := strings.Cut(url, "?")
	scheme, rest, _ := strings.Cut(base, "://")
	host, _, _ := strings.Cut(rest, "/")
	out := scheme + "://" + host + "/" + name
	if query != "" {
		out += "?" + query
	}
	return out
}

func run(ctx context.Context, url string, n, workers, poolSize, batch int, cooldown, pollInterval time.Duration, asJSON bool) error {
	if !strings.HasPrefix(url, "postgres://") && !strings.HasPrefix(url, "postgresql://") {
		return fmt.Errorf("-database-url must be a postgres:// URL, not %q", url)
	}
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer admin.Close(context.Background())
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "river_bench_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return err
	}
	defer admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") //nolint:errcheck

	cfg, err := pgxpool.ParseConfig(withDatabase(url, name))
	if err != nil {
		return err
	}
	cfg.MaxConns = int32(poolSize)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}

	var (
		first firstTime
		done  atomic.Int64
	)
	ws := river.NewWorkers()
	river.AddWorker(ws, &noopWorker{first: &first, n: &done})
	client, err := river.NewClient(driver, &river.Config{
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers:           ws,
		FetchCooldown:     cooldown,
		FetchPollInterval: pollInterval,
	})
	if err != nil {
		return err
	}

	fmt.Fprintf(os.Stderr, "riverbench: inserting %d jobs\n", n)
	start := time.Now()
	params := make([]river.InsertManyParams, 0, batch)
	for left := n; left > 0; left -= len(params) {
		params = params[:0]
		for range min(batch, left) {
			params = append(params, river.InsertManyParams{Args: noopArgs{}})
		}
		if _, err := client.InsertMany(ctx, params); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
	}
	createDur := time.Since(start)
	if _, err := pool.Exec(ctx, "ANALYZE river_job"); err != nil {
		return err
	}

	fmt.Fprintf(os.Stderr, "riverbench: working them with %d workers\n", workers)
	if err := client.Start(ctx); err != nil {
		return err
	}
	// Wait for every Work call (counted by the worker: no load on the
	// server while the jobs run), then for River's completer to mark them
	// completed. River's event subscription is no way to count: it drops
	// events when its buffer is full, as it is at a few thousand jobs/s.
	deadline := time.Now().Add(max(2*time.Minute, time.Duration(n)*time.Millisecond))
	for done.Load() < int64(n) {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d jobs worked in time", done.Load(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for {
		var completed int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&completed); err != nil {
			return err
		}
		if completed == n {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d jobs completed in time", completed, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil {
		return err
	}
	var last time.Time
	var count int
	if err := pool.QueryRow(ctx, "SELECT max(finalized_at), count(*) FROM river_job WHERE state = 'completed'").Scan(&last, &count); err != nil {
		return err
	}
	if count != n {
		return fmt.Errorf("%d of %d jobs completed", count, n)
	}
	elapsed := last.Sub(first.t)
	out := map[string]any{
		"scenario": "river-oneshot", "n": n, "workers": workers, "pool": poolSize, "batch": batch,
		"fetch_cooldown":      cmpOr(cooldown, river.FetchCooldownDefault).String(),
		"fetch_poll_interval": cmpOr(pollInterval, river.FetchPollIntervalDefault).String(),
		"create_per_sec":      float64(n) / createDur.Seconds(),
		"run_sec":             elapsed.Seconds(),
		"jobs_per_sec":        float64(n) / elapsed.Seconds(),
	}
	if asJSON {
		return json.NewEncoder(os.Stdout).Encode(out)
	}
	fmt.Printf("river oneshot: n=%d workers=%d pool=%d fetch_cooldown=%s fetch_poll_interval=%s\n  %.0f jobs/s (%.2fs), insert %.0f jobs/s\n",
		n, workers, poolSize, out["fetch_cooldown"], out["fetch_poll_interval"], out["jobs_per_sec"], elapsed.Seconds(), out["create_per_sec"])
	return nil
}

func cmpOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}
