package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/internal/database"
	corosql "github.com/corotask/corotask/sql"
	"github.com/corotask/corotask/tasks"
)

// server is the PostgreSQL server the scenarios create their databases on.
type server struct {
	url string // any database of the server; fresh databases are made through it
	env Env
}

// openServer resolves the server and describes it.
func openServer(ctx context.Context, explicit string) (*server, error) {
	u, err := database.URL(ctx, explicit)
	if err != nil {
		return nil, err
	}
	conn, err := connect(ctx, u, "")
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	s := &server{url: u}
	err = conn.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('synchronous_commit'),
		current_setting('shared_buffers'), current_setting('max_connections'), current_setting('autovacuum')`).
		Scan(&s.env.Server, &s.env.SynchronousCommit, &s.env.SharedBuffers, &s.env.MaxConnections, &s.env.Autovacuum)
	if err != nil {
		return nil, fmt.Errorf("describe server: %w", err)
	}
	cfg := conn.Config()
	s.env.Host = cfg.Host
	if cfg.Port != 0 && !strings.HasPrefix(cfg.Host, "/") {
		s.env.Host = fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
	}
	s.env.CPUs = runtime.NumCPU()
	s.env.GoVersion = runtime.Version()
	s.env.OS = runtime.GOOS + "/" + runtime.GOARCH
	return s, nil
}

// connect opens one connection to url, on database db instead of the URL's
// when db is not empty.
func connect(ctx context.Context, url, db string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	if db != "" {
		cfg.Database = db
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	cfg.RuntimeParams["application_name"] = "corotask-bench"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", database.Redact(url), err)
	}
	return conn, nil
}

// openPool opens a pool of at most size connections on url (database db
// when not empty).
func openPool(ctx context.Context, url, db string, size int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	if db != "" {
		cfg.ConnConfig.Database = db
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "corotask-bench"
	cfg.MaxConns = int32(size)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool on %s: %w", database.Redact(url), err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to %s: %w", database.Redact(url), err)
	}
	return pool, nil
}

// freshDB is a database made for one scenario.
type freshDB struct {
	name string
	url  string
}

// freshDatabase creates and migrates a database of its own for a scenario.
func (s *server) freshDatabase(ctx context.Context) (*freshDB, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "corotask_bench_" + hex.EncodeToString(b[:])
	conn, err := connect(ctx, s.url, "")
	if err != nil {
		return nil, err
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+name)
	conn.Close(context.Background())
	if err != nil {
		return nil, fmt.Errorf("create database %s: %w", name, err)
	}
	db := &freshDB{name: name, url: withDatabase(s.url, name)}
	mc, err := connect(ctx, s.url, name)
	if err == nil {
		err = corosql.Migrate(ctx, mc)
		mc.Close(context.Background())
	}
	if err != nil {
		_ = s.drop(context.WithoutCancel(ctx), name)
		return nil, fmt.Errorf("migrate %s: %w", name, err)
	}
	return db, nil
}

// withDatabase returns the connection string url with its database replaced
// by name: a URL's path, or a dbname keyword appended to a keyword/value
// string (the last one wins).
func withDatabase(url, name string) string {
	if strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://") {
		base, query, _ := strings.Cut(url, "?")
		scheme, rest, _ := strings.Cut(base, "://")
		host, _, _ := strings.Cut(rest, "/")
		out := scheme + "://" + host + "/" + name
		if query != "" {
			out += "?" + query
		}
		return out
	}
	return url + " dbname=" + name
}

func (s *server) drop(ctx context.Context, name string) error {
	conn, err := connect(ctx, s.url, "")
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	return err
}

// statementsAvailable reports whether pg_stat_statements is loaded, and
// creates the extension in the scenario's database if so.
func (s *server) statementsAvailable(ctx context.Context, url string) bool {
	conn, err := connect(ctx, url, "")
	if err != nil {
		return false
	}
	defer conn.Close(context.Background())
	var libs string
	if err := conn.QueryRow(ctx, "SELECT current_setting('shared_preload_libraries')").Scan(&libs); err != nil ||
		!strings.Contains(libs, "pg_stat_statements") {
		return false
	}
	_, err = conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
	return err == nil
}

// horizonHolder describes the oldest transaction of the server (in any
// database), prepared transaction or replication slot that holds back the
// xmin horizon, and for how long, if more than a few seconds. While one
// does, PostgreSQL cannot mark the index entries of claimed tasks dead
// (kill bits), so every claim walks past all the tasks claimed since.
func (s *server) horizonHolder(ctx context.Context) (string, float64) {
	conn, err := connect(ctx, s.url, "")
	if err != nil {
		return "", 0
	}
	defer conn.Close(context.Background())
	var what string
	var age float64
	err = conn.QueryRow(ctx, `SELECT what, extract(epoch FROM age)::float8 FROM (
			SELECT format('a transaction of pid %s in database %s (%s)', pid, datname, state) AS what, now() - xact_start AS age
			FROM pg_stat_activity
			WHERE (backend_xid IS NOT NULL OR backend_xmin IS NOT NULL) AND pid <> pg_backend_pid() AND xact_start IS NOT NULL
			UNION ALL
			SELECT format('prepared transaction %s', gid), now() - prepared FROM pg_prepared_xacts
			UNION ALL
			SELECT format('replication slot %s', slot_name), interval '1 year' FROM pg_replication_slots
			WHERE xmin IS NOT NULL OR catalog_xmin IS NOT NULL
		) h WHERE age > interval '5 seconds' ORDER BY age DESC LIMIT 1`).Scan(&what, &age)
	if err != nil {
		return "", 0
	}
	return what, age
}

// runner is what a scenario runs with.
type runner struct {
	url        string // the scenario's database
	db         string // overrides url's database when not empty
	opts       Options
	stderr     io.Writer
	log        *slog.Logger
	statements bool
}

func newRunner(url, db string, opts Options, stderr io.Writer) *runner {
	return &runner{url: url, db: db, opts: opts, stderr: stderr,
		log: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
}

func (r *runner) progress(format string, a ...any) {
	fmt.Fprintf(r.stderr, "bench %s: %s\n", r.opts.Scenario, fmt.Sprintf(format, a...))
}

func (r *runner) pool(ctx context.Context, size int) (*pgxpool.Pool, error) {
	return openPool(ctx, r.url, r.db, size)
}

func (r *runner) conn(ctx context.Context) (*pgx.Conn, error) {
	return connect(ctx, r.url, r.db)
}

// createTasks creates n tasks from spec (a fresh ID each) with CreateMany,
// batch at a time, and returns their IDs and how long it took.
func (r *runner) createTasks(ctx context.Context, db tasks.DB, n int, spec tasks.Spec) ([]tasks.ID, time.Duration, error) {
	ids := make([]tasks.ID, 0, n)
	batch := make([]tasks.Spec, 0, r.opts.Batch)
	start := time.Now()
	for len(ids) < n {
		batch = batch[:0]
		for range min(r.opts.Batch, n-len(ids)) {
			batch = append(batch, spec)
		}
		got, err := tasks.CreateMany(ctx, db, batch)
		if err != nil {
			return nil, 0, err
		}
		ids = append(ids, got...)
	}
	return ids, time.Since(start), nil
}

// analyze runs ANALYZE on the tasks table, as autovacuum would sooner or
// later, unless Options.NoAnalyze.
func (r *runner) analyze(ctx context.Context, db tasks.DB) error {
	if r.opts.NoAnalyze {
		return nil
	}
	_, err := db.Exec(ctx, "ANALYZE corotask.tasks")
	return err
}

// walLSN returns the server's current WAL position, for WAL bytes written.
func walLSN(ctx context.Context, db tasks.DB) (int64, error) {
	var n int64
	err := db.QueryRow(ctx, "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").Scan(&n)
	return n, err
}

// serverTime returns the server's clock (the scenario compares it with
// times taken here: both are the same machine's clock on loopback).
func latestDone(ctx context.Context, db tasks.DB) (time.Time, error) {
	var t *time.Time
	if err := db.QueryRow(ctx, "SELECT max(done_at) FROM corotask.tasks").Scan(&t); err != nil {
		return time.Time{}, err
	}
	if t == nil {
		return time.Time{}, errors.New("no task is done")
	}
	return *t, nil
}

// waitUntil polls cond every interval until it is true, ctx ends or timeout
// passes.
func waitUntil(ctx context.Context, what string, timeout, interval time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("wait for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("wait for %s: timed out after %s", what, timeout)
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// collectStatements adds the scenario's top statements to res.
func (r *runner) collectStatements(ctx context.Context, res *Result) error {
	conn, err := r.conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT regexp_replace(query, '\s+', ' ', 'g'), calls, total_exec_time, mean_exec_time, rows,
			shared_blks_hit, shared_blks_read, wal_bytes::bigint,
			jit_generation_time + jit_inlining_time + jit_optimization_time + jit_emission_time
		FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		ORDER BY total_exec_time DESC LIMIT 12`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var s Statement
		if err := rows.Scan(&s.Query, &s.Calls, &s.TotalMS, &s.MeanMS, &s.Rows, &s.SharedHit, &s.SharedRead, &s.WALBytes, &s.JITMS); err != nil {
			return err
		}
		if len(s.Query) > 110 {
			s.Query = s.Query[:110] + "..."
		}
		res.Statements = append(res.Statements, s)
	}
	return rows.Err()
}

// anyLiveSQL says whether a task is still ready, sleeping or running, by
// the partial indexes the claim uses (tasks_ready_idx, tasks_running_idx):
// a progress check that does not read the whole table (a sequential scan of
// done_at IS NULL would walk past every task done so far, at every check,
// and weigh on the figure it waits for). Suspended tasks (wake_at NULL) are
// not seen: scenarios that suspend tasks wait on something else.
const anyLiveSQL = `SELECT EXISTS (SELECT 1 FROM corotask.tasks WHERE claim IS NULL AND done_at IS NULL AND wake_at IS NOT NULL)
	OR EXISTS (SELECT 1 FROM corotask.tasks WHERE claim IS NOT NULL)`

// anyLive runs anyLiveSQL; enable_seqscan is off for it, so that the plan
// stays on the indexes whatever the table's statistics say.
func anyLive(ctx context.Context, db *pgxpool.Pool) (bool, error) {
	var left bool
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
			return err
		}
		return tx.QueryRow(ctx, anyLiveSQL).Scan(&left)
	})
	return left, err
}

// tableStats are corotask.tasks's cumulative statistics.
type tableStats struct {
	seqScans, idxScans, inserts, updates, hotUpdates, deletes int64
}

// readTableStats reads corotask.tasks's pg_stat_user_tables row. Backends
// report their counts when their transactions end, at most once a second,
// and when they exit: read it after the scenario's executors have stopped.
func readTableStats(ctx context.Context, db tasks.DB) (tableStats, error) {
	var s tableStats
	err := db.QueryRow(ctx, `SELECT seq_scan, coalesce(idx_scan, 0), n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del
		FROM pg_stat_user_tables WHERE relid = 'corotask.tasks'::regclass`).
		Scan(&s.seqScans, &s.idxScans, &s.inserts, &s.updates, &s.hotUpdates, &s.deletes)
	return s, err
}

// addTableStats adds to res what the table saw between before and after:
// updates, the share of them that were HOT (no index entry written), and
// sequential scans.
func addTableStats(res *Result, before, after tableStats) {
	upd := after.updates - before.updates
	res.metric("table_updates", upd)
	if upd > 0 {
		res.metric("hot_update_pct", 100*float64(after.hotUpdates-before.hotUpdates)/float64(upd))
	}
	res.metric("table_seq_scans", after.seqScans-before.seqScans)
}
