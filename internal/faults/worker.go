package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/tasks"
)

// WorkerEnv is the environment variable that carries a worker's
// configuration (JSON): a test binary started with it set runs WorkerMain
// instead of its tests.
const WorkerEnv = "COROTASK_FAULTS_WORKER"

// AppNamePrefix starts the application_name of every worker connection, so
// that the harness can find them in pg_stat_activity.
const AppNamePrefix = "corotask-fault-worker"

// WorkerConfig configures one worker process.
type WorkerConfig struct {
	URL  string // the database
	Name string // e.g. w1; the same across restarts of one worker slot
	Seed uint64
	// ReadyFD, when above 0, is a file descriptor (a pipe the harness
	// passes) on which the worker writes a byte once its signal handlers
	// are set: until then a SIGHUP, SIGUSR1 or SIGUSR2 would kill it.
	ReadyFD int
	// AttemptLog is the file every poll appends one line to when it starts
	// (and when it fails, panics, stalls or kills its process on purpose):
	// written before anything else, it survives SIGKILL.
	AttemptLog       string
	Concurrency      int
	HeartbeatTimeout time.Duration
	PollInterval     time.Duration
	// ErrorRate, PanicRate and StallRate are the chances that a poll fails,
	// panics, or stalls for Stall (ignoring its context) before going on.
	ErrorRate, PanicRate, StallRate float64
	Stall                           time.Duration
	// OnCommitPanicRate and LockWaitRate are the chances that a commit's
	// OnCommit panics, and that its first attempt waits for a lock past
	// statement_timeout.
	OnCommitPanicRate, LockWaitRate float64
	// DisableListen is the executor's Config.DisableListen.
	DisableListen bool
	// PriorityRate is the chance that a node is spawned with a priority
	// above 0.
	PriorityRate float64
}

// Worker runs the workload's pollers in one process.
type Worker struct {
	cfg   WorkerConfig
	armed atomic.Int32 // a kill point, armed by SIGUSR1 or SIGUSR2

	mu  sync.Mutex
	rng *rand.Rand
	log *os.File

	// holder is a connection of the worker's own that holds the advisory
	// lock an OnCommit then waits for; one lock wait at a time.
	holdMu sync.Mutex
	holder *pgx.Conn
}

// Kill points.
const (
	killNone int32 = iota
	killInPoll
	killInCommit
)

// WorkerMain runs a worker configured by cfgJSON (a WorkerConfig) until
// SIGTERM or SIGINT, and returns the process's exit code.
func WorkerMain(cfgJSON string) int {
	// First of all, before a signal's default action can kill the process.
	armSignals := make(chan os.Signal, 4)
	signal.Notify(armSignals, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGHUP)
	var cfg WorkerConfig
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "faults worker: bad configuration: %v\n", err)
		return 2
	}
	if cfg.ReadyFD > 0 {
		ready := os.NewFile(uintptr(cfg.ReadyFD), "ready")
		_, _ = ready.Write([]byte{1})
		_ = ready.Close()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := runWorker(ctx, cfg, armSignals); err != nil {
		fmt.Fprintf(os.Stderr, "faults worker %s: %v\n", cfg.Name, err)
		return 1
	}
	return 0
}

// RunWorker runs an executor with the workload's pollers until ctx ends,
// then stops it gracefully. Logs (JSON) go to stderr.
//
// Signals: SIGUSR1 arms a kill in the next poll (the process SIGKILLs itself
// in the middle of a poll), SIGUSR2 a kill in the next commit (inside the
// commit transaction, after the task's row was updated), SIGHUP disarms.
func RunWorker(ctx context.Context, cfg WorkerConfig) error {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGHUP)
	return runWorker(ctx, cfg, sigs)
}

func runWorker(ctx context.Context, cfg WorkerConfig, sigs chan os.Signal) error {
	f, err := os.OpenFile(cfg.AttemptLog, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	w := &Worker{cfg: cfg, log: f, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))}
	trapWorker.Store(w)
	defer trapWorker.Store(nil)
	defer w.closeHolder()

	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return err
	}
	pcfg.ConnConfig.RuntimeParams["application_name"] = AppNamePrefix + "-" + cfg.Name
	pcfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return err
	}
	defer pool.Close()

	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	logger = logger.With("worker", cfg.Name, "pid", os.Getpid())
	e, err := executor.New(pool, executor.Config{
		Concurrency:      cfg.Concurrency,
		PrioritySlots:    2, // nodes with a priority are also claimed beside the claim loop
		HeartbeatTimeout: cfg.HeartbeatTimeout,
		PollInterval:     cfg.PollInterval,
		ShutdownTimeout:  5 * time.Second,
		Retention:        -1, // the ledger check needs every ended task
		BackoffMin:       20 * time.Millisecond,
		BackoffMax:       500 * time.Millisecond,
		Logger:           logger,
		DisableListen:    cfg.DisableListen,
	})
	nodes := executor.PollerFunc[NodeState, Msg](w.pollNode)
	executor.Register(e, TypeRoot, nodes)
	executor.Register(e, TypeNode, nodes)
	executor.Register(e, TypeDoomed, executor.PollerFunc[struct{}, Msg](w.pollDoomed), executor.MaxFailures(DoomedMaxFailures))
	executor.Register(e, TypeVictim, executor.PollerFunc[VictimState, Msg](w.pollVictim))

	// Arm signals that arrive while the worker stops are ignored: stopping
	// their delivery instead would leave them their default action, which
	// kills the process, and the harness would count a crash.
	defer signal.Ignore(syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGHUP)
	go func() {
		for s := range sigs {
			switch s {
			case syscall.SIGUSR1:
				w.armed.Store(killInPoll)
			case syscall.SIGUSR2:
				w.armed.Store(killInCommit)
			case syscall.SIGHUP:
				w.armed.Store(killNone)
			}
		}
	}()
	logger.Info("faults: worker started")
	err = e.Run(ctx)
	logger.Info("faults: worker stopped", "error", err)
	return err
}

// maybeDie kills the process if a kill is armed at this point.
func (w *Worker) maybeDie(at int32) {
	if !w.armed.CompareAndSwap(at, killNone) {
		return
	}
	what := "poll"
	if at == killInCommit {
		what = "commit"
	}
	w.attempt("K", tasks.Type(what), tasks.ID{})
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // SIGKILL cannot be caught: wait for it
}

// attempt appends one line to the attempt log: kind, task type, task id.
func (w *Worker) attempt(kind string, typ tasks.Type, id tasks.ID) {
	line := kind + " " + string(typ) + " " + id.UUID() + "\n"
	w.mu.Lock()
	defer w.mu.Unlock()
	_, _ = w.log.WriteString(line)
}

func (w *Worker) float() float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rng.Float64()
}

func (w *Worker) intn(n int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rng.IntN(n)
}

// pad returns some kilobytes of text, so that messages vary in size.
func (w *Worker) pad() string {
	return strings.Repeat("x", 1+w.intn(4096))
}

// lockWait makes the commit transaction tx wait for a lock another
// connection holds, past a statement_timeout, as a commit behind a long
// transaction would: it returns the server's error (57014), which the
// executor must retry, not count against the poll. It returns nil, and
// injects nothing, when the lock cannot be taken first (the database is
// down).
func (w *Worker) lockWait(ctx context.Context, tx pgx.Tx, typ tasks.Type, id tasks.ID) error {
	w.holdMu.Lock()
	defer w.holdMu.Unlock()
	hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if w.holder == nil || w.holder.IsClosed() {
		c, err := pgx.Connect(hctx, w.cfg.URL)
		if err != nil {
			return nil
		}
		w.holder = c
	}
	key := int64(w.intn(1 << 30))
	// Held in a transaction, not by the session: behind a pooler in
	// transaction mode, a session's lock would stay on a server connection
	// the holder does not keep.
	hold, err := w.holder.Begin(hctx)
	if err != nil {
		w.closeHolderLocked()
		return nil
	}
	defer func() {
		if err := hold.Rollback(hctx); err != nil {
			w.closeHolderLocked() // closing the session releases its lock
		}
	}()
	if _, err := hold.Exec(hctx, `SELECT pg_advisory_xact_lock($1)`, key); err != nil {
		return nil
	}
	w.attempt("L", typ, id)
	_, err = tx.Exec(ctx, `SET LOCAL statement_timeout = '20ms'`)
	if err == nil {
		_, err = tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, key)
	}
	if err == nil {
		// The holder's session ended meanwhile (a terminated backend, a
		// restart) and its lock with it: nothing was injected.
		if _, herr := hold.Exec(hctx, `SELECT 1`); herr != nil {
			return nil
		}
		return errors.New("faults: a lock wait past statement_timeout did not time out")
	}
	return err
}

func (w *Worker) closeHolder() {
	w.holdMu.Lock()
	defer w.holdMu.Unlock()
	w.closeHolderLocked()
}

func (w *Worker) closeHolderLocked() {
	if w.holder != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = w.holder.Close(ctx)
		w.holder = nil
	}
}
