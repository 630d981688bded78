package faults_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/database"
	"github.com/corotask/corotask/internal/faults"
	"github.com/corotask/corotask/internal/testdb"
	_ "github.com/corotask/corotask/internal/testexit" // no race detector pause at exit
	corosql "github.com/corotask/corotask/sql"
	"github.com/corotask/corotask/tasks"
)

var (
	flagDuration = flag.Duration("faults.duration", 0, "how long to inject faults (default 10s; the long run takes minutes, see docs/guarantees.md)")
	flagWorkers  = flag.Int("faults.workers", 3, "executor processes")
	flagSeed     = flag.Uint64("faults.seed", 0, "random seed (default: the time)")
	flagEvery    = flag.Duration("faults.every", 0, "mean time between injected faults (default 1s)")
	flagRestart  = flag.Duration("faults.restart-every", 0, "least time between PostgreSQL restarts (default a third of the duration, at most 30s)")
	flagRoots    = flag.Int("faults.roots", 0, "live root tasks kept (default 6)")
	flagShared   = flag.Bool("faults.shared-db", false, "use the shared test server (DATABASE_URL...) instead of a private cluster; disables restarts")
	flagDir      = flag.String("faults.dir", "", "keep the workers' logs in this directory")
	flagReport   = flag.String("faults.report", "", "append the figures to this file")
	flagCitusDir = flag.String("faults.citus-dir", "", "TestFaultsOnCitus: the cluster's directory (scripts/citus/cluster.sh --dir), whose nodes the run restarts in turn; run no other test on the cluster meanwhile")
)

// TestMain runs a worker instead of the tests when the harness started this
// binary as one: workers are real OS processes, built with the same flags
// (-race included) as the tests.
func TestMain(m *testing.M) {
	if cfg := os.Getenv(faults.WorkerEnv); cfg != "" {
		os.Exit(faults.WorkerMain(cfg))
	}
	os.Exit(m.Run())
}

func workerCommand(cfg faults.WorkerConfig) (*exec.Cmd, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), faults.WorkerEnv+"="+string(b))
	// Should the test binary die (a timeout), its workers die with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd, nil
}

// cluster starts a private PostgreSQL cluster for the test, and returns the
// URL of a migrated database in it and a function that restarts the server.
func cluster(t *testing.T) (url string, restart func(context.Context, bool) error, ok bool) {
	t.Helper()
	ctx := context.Background()
	tmp := t.TempDir()
	if os.Geteuid() == 0 {
		// The postgres OS user that runs the server must be able to enter it.
		require.NoError(t, os.Chmod(tmp, 0o755))
		require.NoError(t, os.Chmod(filepath.Dir(tmp), 0o755))
	}
	dir := filepath.Join(tmp, "pg")
	admin, err := database.Private(ctx, dir)
	if errors.Is(err, database.ErrNoPostgres) {
		return "", nil, false
	}
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, database.StopPrivate(context.Background(), dir)) })

	conn, err := pgx.Connect(ctx, admin)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE DATABASE faults")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
	url = testdb.WithDatabase(t, admin, "faults")
	conn, err = pgx.Connect(ctx, url)
	require.NoError(t, err)
	require.NoError(t, corosql.Migrate(ctx, conn))
	require.NoError(t, conn.Close(ctx))

	restart = func(ctx context.Context, crash bool) error {
		if !crash {
			if err := database.StopPrivate(ctx, dir); err != nil {
				return err
			}
		} else if err := quitPostmaster(ctx, dir); err != nil {
			return err
		}
		_, err := database.Private(ctx, dir)
		return err
	}
	return url, restart, true
}

// quitPostmaster shuts the server in dir down the immediate way (SIGQUIT:
// no checkpoint, crash recovery at the next start) and waits until it is gone.
func quitPostmaster(ctx context.Context, dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		return err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return fmt.Errorf("postmaster.pid: %w", err)
	}
	if err := syscall.Kill(pid, syscall.SIGQUIT); err != nil {
		return fmt.Errorf("signal postmaster %d: %w", pid, err)
	}
	for {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return nil // gone
		}
		if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			return nil // a zombie nobody reaps: gone as far as postgres is concerned
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("postmaster %d did not exit: %w", pid, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestFaults runs the workload under faults and checks the ledger. By
// default it injects faults for 10s, long enough for every kind of fault to
// be injected, short enough for `go test ./...`; see docs/guarantees.md for
// the long run (-faults.duration).
func TestFaults(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the fault harness needs Linux signals and /proc")
	}
	ctx := context.Background()
	duration := *flagDuration
	short := duration == 0
	if short {
		duration = 10 * time.Second
	}

	restartEvery := *flagRestart
	if restartEvery == 0 {
		restartEvery = min(max(duration/3, 5*time.Second), 30*time.Second)
	}

	url, restart := faultsDatabase(t)

	dir := *flagDir
	if dir == "" {
		var err error
		dir, err = os.MkdirTemp("", "corotask-faults-")
		require.NoError(t, err)
	} else {
		require.NoError(t, os.MkdirAll(dir, 0o755))
	}

	cfg := faults.Config{
		URL: url, Dir: dir, Command: workerCommand, Restart: restart,
		Duration: duration, Workers: *flagWorkers, Seed: *flagSeed,
		FaultEvery: *flagEvery, RestartEvery: restartEvery, Roots: *flagRoots,
		Logf: t.Logf,
	}
	if short {
		// The short run must inject each kind checked below at least once.
		// Decoder panics and poison messages ride on external messages, of
		// which a short run sends about a hundred: at the default rates
		// (5% and 10%) a loaded machine saw runs with none. Three times
		// that makes a run without one unlikely (e^-15).
		cfg.TrapRate, cfg.PoisonRate = 0.15, 0.3
	}
	began := time.Now()
	r, err := faults.Run(ctx, cfg)
	require.NoError(t, err)
	t.Logf("faults: figures after %s:\n%s", time.Since(began).Round(time.Second), r)
	if *flagReport != "" {
		f, err := os.OpenFile(*flagReport, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		require.NoError(t, err)
		host, _ := os.Hostname()
		fmt.Fprintf(f, "## %s, %s, %d CPUs, %s %s\n\ncommand: %s\n\n```\n%s```\n\n",
			began.UTC().Format(time.RFC3339), host, runtime.NumCPU(), runtime.Version(), raceNote,
			strings.Join(os.Args, " "), r)
		require.NoError(t, f.Close())
	}
	violations := r.Violations()
	if len(violations) > 0 {
		t.Errorf("faults: %d violations (logs kept in %s):\n%s", len(violations), dir, strings.Join(violations, "\n"))
		return
	}
	require.Zero(t, r.Ledger.Total.Lost)
	require.Zero(t, r.Ledger.Total.Duplicated)
	require.Positive(t, r.Ledger.CommittedPolls)
	require.Positive(t, r.Ledger.AwaitedPolls, "no poll awaited its children")
	// The limits bound: the sampler saw them reached, and tasks wait.
	require.Positive(t, r.Limits.NodeAtLimit, "no reading saw %s at its maximum", faults.TypeNode)
	require.Positive(t, r.Limits.KeyAtLimit, "no reading saw a key of %s at its limit", faults.KeySpaceTree)
	require.Positive(t, r.Limits.NodeWaitsMax, "no reading saw a %s task wait", faults.TypeNode)
	injected := r.Faults()
	for _, k := range []string{faults.FaultDecodePanic, faults.FaultCommitPanic, faults.FaultLockWait, faults.FaultPoison} {
		require.Positive(t, injected[k], "no %s injected", k)
	}
	if *flagDir == "" {
		_ = os.RemoveAll(dir)
	}
}

// TestCheckFindsViolations makes sure the checks are not vacuous: a ledger
// with one of each violation is reported as such.
func TestCheckFindsViolations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	require.NoError(t, faults.CreateLedger(ctx, db))

	root, err := tasks.Create(ctx, db, tasks.Spec{Type: faults.TypeRoot, State: faults.NodeState{Polls: 2}})
	require.NoError(t, err)
	child, err := tasks.Create(ctx, db, tasks.Spec{Type: faults.TypeNode, Parent: root, State: faults.NodeState{Polls: 3}})
	require.NoError(t, err)
	other, err := tasks.Create(ctx, db, tasks.Spec{Type: faults.TypeNode, State: faults.NodeState{Polls: 5}})
	require.NoError(t, err)
	wrong, err := tasks.Create(ctx, db, tasks.Spec{Type: faults.TypeRoot})
	require.NoError(t, err)
	live, err := tasks.Create(ctx, db, tasks.Spec{Type: faults.TypeNode})
	require.NoError(t, err)
	// m4 stays in the child's inbox: pending, not lost.
	require.NoError(t, inbox.Send(ctx, db, child, tasks.ID{}, faults.Msg{ID: "m4", Kind: faults.KindExt}))
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET outcome = 'done', done_at = now(), wake_at = NULL WHERE task_id = ANY($1)`,
		[]tasks.ID{root, child, other})
	require.NoError(t, err)
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET outcome = 'failed', done_at = now(), wake_at = NULL WHERE task_id = $1`, wrong)
	require.NoError(t, err)

	for _, q := range []string{
		`INSERT INTO faults.sent (msg_id, to_task, kind) VALUES
			('m1', $1, 'ext'), ('m2', $1, 'ext'), ('m3', $1, 'ext'), ('m4', $2, 'ext'), ('m5', $1, 'ext'), ('m5', $1, 'ext'),
			('m7', $1, 'ext'), ('x', $3, 'ext')`,
		`INSERT INTO faults.consumed (msg_id, task_id, poll_id) VALUES
			('m1', $1, gen_random_uuid()), ('m3', $1, gen_random_uuid()), ('m3', $1, gen_random_uuid()),
			('m5', $1, gen_random_uuid()), ('m6', $1, gen_random_uuid()), ('m7', $2, gen_random_uuid()),
			('x', $3, gen_random_uuid())`,
		`INSERT INTO faults.polls (poll_id, task_id, seq, executor, started_at, committed_at) VALUES
			(gen_random_uuid(), $1, 1, 'w1', now() - interval '10 s', now() - interval '5 s'),
			(gen_random_uuid(), $1, 2, 'w1', now() - interval '4 s', now() - interval '3 s'),
			(gen_random_uuid(), $1, 2, 'w2', now() - interval '6 s', now() - interval '2 s'),
			(gen_random_uuid(), $2, 1, 'w1', now() - interval '10 s', now() - interval '9 s'),
			(gen_random_uuid(), $2, 3, 'w1', now() - interval '8 s', now() - interval '7 s'),
			(gen_random_uuid(), $3, 1, 'w1', now() - interval '8 s', now() - interval '7 s')`,
		`INSERT INTO faults.anomalies (task_id, what) SELECT $1, 'seq 3, want 2' WHERE $2::uuid IS NOT NULL AND $3::uuid IS NOT NULL`,
	} {
		_, err = db.Exec(ctx, q, root, child, other)
		require.NoError(t, err)
	}

	l, err := faults.Check(ctx, db)
	require.NoError(t, err)
	require.Equal(t, 5, l.TasksTotal)
	require.Equal(t, 1, l.Live)
	require.Len(t, l.Unended, 1)
	require.Contains(t, l.Unended[0], live.UUID())
	require.Len(t, l.Outcomes, 1, "a root that failed")
	require.Equal(t, 7, l.Total.Sent)
	require.Equal(t, 1, l.Total.Lost, "m2")
	require.Equal(t, 1, l.Total.Duplicated, "m3")
	require.Equal(t, 1, l.Total.SentTwice, "m5")
	require.Equal(t, 1, l.Total.Misdelivered, "m7")
	require.Equal(t, 1, l.Total.Pending, "m4")
	require.Equal(t, 1, l.Phantoms, "m6")
	require.Equal(t, 1, l.Children)
	require.Equal(t, 1, l.CompletionsMissing)
	require.Equal(t, 6, l.CommittedPolls)
	require.Equal(t, 6, l.Total.Consumed, "m1, m3 twice, m5, m7, x")
	require.Equal(t, 1, l.DoubleCommits, "root: 1, 2, 2")
	require.Equal(t, 1, l.SeqGaps, "child: 1, 3")
	require.Equal(t, 1, l.StateMismatch, "other: one poll, state says 5")
	require.Equal(t, 1, l.Overlaps, "root's second seq 2 began before the first committed")
	require.Len(t, l.Anomalies, 1)
	require.NotEmpty(t, l.Violations())

	// A clean ledger has no violations.
	clean := testdb.New(t)
	require.NoError(t, faults.CreateLedger(ctx, clean))
	l, err = faults.Check(ctx, clean)
	require.NoError(t, err)
	require.Empty(t, l.Violations())
}

// faultsDatabase returns the database a fault run uses, and how to restart
// its server: a private cluster of the run's own, or, without PostgreSQL
// binaries or with -faults.shared-db, a database on the shared server, which
// is never restarted (restart is then nil).
func faultsDatabase(t *testing.T) (url string, restart func(context.Context, bool) error) {
	t.Helper()
	if !*flagShared {
		if url, restart, ok := cluster(t); ok {
			return url, restart
		}
	}
	t.Log("faults: no private cluster (no PostgreSQL binaries, or -faults.shared-db): using the shared server, without restarts")
	return testdb.URL(t), nil
}

// TestSampleLimits makes sure the limits sampler counts what the limits
// count (unexpired claims; per key, over the key space's types only) and
// that a reading above a limit is a violation.
func TestSampleLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	require.NoError(t, faults.SetLimits(ctx, db, 2, 3))

	create := func(typ tasks.Type, key string) tasks.ID {
		id, err := tasks.Create(ctx, db, tasks.Spec{Type: typ, LimitKey: key})
		require.NoError(t, err)
		return id
	}
	claim := func(expires string, counted bool, ids ...tasks.ID) {
		_, err := db.Exec(ctx, `UPDATE corotask.tasks SET claim = gen_random_uuid(), claimed_by = gen_random_uuid(),
			claim_expires_at = now() + $2::interval, counted = $3 WHERE task_id = ANY ($1)`, ids, expires, counted)
		require.NoError(t, err)
	}
	claim("1 hour", true, create(faults.TypeNode, "k"), create(faults.TypeNode, "k"))
	claim("1 hour", false, create(faults.TypeNode, "k"))
	claim("-1 second", true, create(faults.TypeNode, "k")) // expired: counts nowhere
	claim("1 hour", false, create(faults.TypeDoomed, "k")) // in the key space
	claim("1 hour", false, create(faults.TypeVictim, "k")) // not in the key space
	claim("1 hour", false, create(faults.TypeDoomed, "j")) // another key
	create(faults.TypeNode, "j")                           // ready, waiting

	s, err := faults.SampleLimits(ctx, db)
	require.NoError(t, err)
	require.Equal(t, 3, s.Node)
	require.Equal(t, 1, s.Uncounted)
	require.Equal(t, 4, s.Key)
	require.Equal(t, "k", s.KeyName)
	require.Equal(t, 1, s.NodeWaits)

	l := &faults.Limits{NodeMaxRunning: 2, TreeKeyLimit: 3}
	require.True(t, l.Record(s))
	require.Equal(t, 3, l.NodeMax)
	require.Equal(t, 4, l.KeyMax)
	require.Len(t, l.Violations(), 3, "node maximum, key limit, uncounted claim")

	within := &faults.Limits{NodeMaxRunning: 3, TreeKeyLimit: 4}
	require.False(t, within.Record(faults.LimitSample{Node: 3, Key: 4}))
	require.Empty(t, within.Violations())
	require.Equal(t, 1, within.NodeAtLimit)
	require.Equal(t, 1, within.KeyAtLimit)
}

// TestFaultsOnCitus runs the short run of TestFaults on a Citus cluster
// (COROTASK_CITUS_URL; skipped without it): its workers killed, frozen past
// their heartbeat timeout and cut from the coordinator, with polls that
// fail, panic and stall, and checks the ledger: nothing lost, nothing twice.
// The fleet-wide maximum of the nodes and the limit per tree's key hold
// (sampled throughout). With -faults.citus-dir it restarts the cluster's
// nodes in turn (a worker, the other, the coordinator), fast or as a crash,
// as TestFaults restarts its server; without it, none (other tests share
// the cluster). -faults.duration sets how long
// faults are injected (default 10s).
func TestFaultsOnCitus(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the fault harness needs Linux signals and /proc")
	}
	ctx := context.Background()
	db := testdb.Citus(t)
	dir := *flagDir
	if dir == "" {
		dir = t.TempDir()
	} else {
		require.NoError(t, os.MkdirAll(dir, 0o755))
	}
	duration := cmp.Or(*flagDuration, 10*time.Second)
	var restart func(ctx context.Context, crash bool) error
	if *flagCitusDir != "" {
		restart = citusRestarts(*flagCitusDir)
	}
	restartEvery := cmp.Or(*flagRestart, min(max(duration/3, 5*time.Second), 30*time.Second))
	cfg := faults.Config{
		URL: db.Config().ConnString(), Dir: dir, Command: workerCommand,
		Restart: restart, RestartEvery: restartEvery,
		Duration: duration, Workers: *flagWorkers, Seed: *flagSeed, Citus: true,
		TrapRate: 0.15, PoisonRate: 0.3,
		Logf: t.Logf,
	}
	r, err := faults.Run(ctx, cfg)
	require.NoError(t, err)
	t.Logf("faults on Citus: figures:\n%s", r)
	if violations := r.Violations(); len(violations) > 0 {
		t.Fatalf("faults on Citus: %d violations:\n%s", len(violations), strings.Join(violations, "\n"))
	}
	require.Zero(t, r.Ledger.Total.Lost)
	require.Zero(t, r.Ledger.Total.Duplicated)
	require.Positive(t, r.Ledger.CommittedPolls)
	require.Positive(t, r.Ledger.AwaitedPolls, "no poll awaited its children")
	require.Positive(t, r.Limits.NodeMax, "the nodes, which have a maximum, were polled")
}

// citusRestarts restarts the nodes of the Citus cluster in dir in turn, a
// node a call: the first worker, the second, the coordinator
// (scripts/citus/cluster.sh restart). A call that failed leaves the turn
// where it was: the harness's second try restarts (or starts) that node.
func citusRestarts(dir string) func(ctx context.Context, crash bool) error {
	nodes := []string{"worker1", "worker2", "coordinator"}
	var n atomic.Int64
	return func(ctx context.Context, crash bool) error {
		node := nodes[n.Load()%int64(len(nodes))]
		args := []string{"../../scripts/citus/cluster.sh", "restart", node, "--dir", dir}
		if crash {
			args = append(args, "--immediate")
		}
		cmd := exec.CommandContext(ctx, "bash", args...)
		// pg_ctl, which outlives a killed bash, holds the output open.
		cmd.WaitDelay = 5 * time.Second
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("restart %s: %w: %s", node, err, out)
		}
		n.Add(1)
		return nil
	}
}
