package faults

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/tasks"
)

// Config configures a Run. Zero fields take the defaults in brackets.
type Config struct {
	// URL is a migrated database the run may fill; the harness creates its
	// ledger there.
	URL string
	// Dir receives the workers' logs and attempt logs.
	Dir string
	// Command returns the command that runs one worker process with cfg,
	// e.g. the test binary itself with WorkerEnv set. Its output is set by Run.
	Command func(cfg WorkerConfig) (*exec.Cmd, error)
	// DisableListen runs the workers' executors without LISTEN/NOTIFY, as
	// behind PgBouncer in transaction mode (URL then names the pooler, and
	// pgx's default_query_exec_mode=cache_describe).
	DisableListen bool
	// Restart restarts PostgreSQL: a fast shutdown, or an immediate one
	// (crash is true: no checkpoint, recovery at start-up). Nil: no restarts.
	Restart func(ctx context.Context, crash bool) error

	Duration     time.Duration // how long faults are injected [30s]
	Workers      int           // worker processes [3]
	Seed         uint64        // [the time]
	FaultEvery   time.Duration // mean time between faults the harness injects [1s]
	RestartEvery time.Duration // least time between PostgreSQL restarts [15s]
	Roots        int           // live root tasks kept while faults are injected [6]
	// ExternalEvery is how often the harness sends a message from outside
	// any task to a random live task [50ms].
	ExternalEvery    time.Duration
	HeartbeatTimeout time.Duration // of the workers [2s]
	Concurrency      int           // of each worker's executor [16]
	// ErrorRate, PanicRate and StallRate are each poll's chances to fail, to
	// panic, and to stall past the heartbeat timeout [0.05, 0.02, 0.01].
	ErrorRate, PanicRate, StallRate float64
	// OnCommitPanicRate and LockWaitRate are each commit's chances that its
	// OnCommit panics, and that it waits for a lock past statement_timeout
	// (the first attempt only) [0.01, 0.02].
	OnCommitPanicRate, LockWaitRate float64
	// PoisonRate and TrapRate are each external message's chances to be a
	// poison message (a body that does not decode as Msg), and to carry the
	// marker on which Msg's decoder panics, half the times it is decoded
	// (at most twice in a worker process) [0.1, 0.05].
	PoisonRate, TrapRate float64
	DrainTimeout         time.Duration // how long the end may take once faults stop [3m]
	// NodeMaxRunning is the fleet-wide maximum of running TypeNode polls
	// (tasks.SetMaxRunning) [6]; TreeKeyLimit the most running tasks of one
	// tree, over TypeNode and TypeDoomed, in the key space KeySpaceTree
	// (tasks.SetKeyLimit) [2].
	NodeMaxRunning, TreeKeyLimit int
	// PriorityRate is the chance that a node is spawned with a priority
	// above 0 (1 to 3) [0.3].
	PriorityRate float64
	// Citus runs on a distributed database (URL names the coordinator):
	// the ledger's tables stay the coordinator's own, and the checks run
	// once the tasks' tables are local again (undistribute).
	Citus bool
	Logf  func(format string, args ...any)
}

func (c Config) withDefaults() Config {
	c.Duration = cmp.Or(c.Duration, 30*time.Second)
	c.Workers = cmp.Or(c.Workers, 3)
	c.Seed = cmp.Or(c.Seed, uint64(time.Now().UnixNano()))
	c.FaultEvery = cmp.Or(c.FaultEvery, time.Second)
	c.RestartEvery = cmp.Or(c.RestartEvery, 15*time.Second)
	c.Roots = cmp.Or(c.Roots, 6)
	c.ExternalEvery = cmp.Or(c.ExternalEvery, 50*time.Millisecond)
	c.HeartbeatTimeout = cmp.Or(c.HeartbeatTimeout, 2*time.Second)
	c.Concurrency = cmp.Or(c.Concurrency, 16)
	c.ErrorRate = cmp.Or(c.ErrorRate, 0.05)
	c.PanicRate = cmp.Or(c.PanicRate, 0.02)
	c.StallRate = cmp.Or(c.StallRate, 0.01)
	c.OnCommitPanicRate = cmp.Or(c.OnCommitPanicRate, 0.01)
	c.LockWaitRate = cmp.Or(c.LockWaitRate, 0.02)
	c.PoisonRate = cmp.Or(c.PoisonRate, 0.1)
	c.TrapRate = cmp.Or(c.TrapRate, 0.05)
	c.DrainTimeout = cmp.Or(c.DrainTimeout, 3*time.Minute)
	c.NodeMaxRunning = cmp.Or(c.NodeMaxRunning, 6)
	c.TreeKeyLimit = cmp.Or(c.TreeKeyLimit, 2)
	c.PriorityRate = cmp.Or(c.PriorityRate, 0.3)
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return c
}

// Fault kinds, as the report names them.
const (
	FaultKill        = "sigkill (random moment)"
	FaultKillPoll    = "sigkill (in a poll)"
	FaultKillCommit  = "sigkill (in the commit transaction)"
	FaultFreeze      = "sigstop past the heartbeat timeout"
	FaultTerminate   = "pg_terminate_backend"
	FaultRestart     = "postgres restart (fast)"
	FaultCrash       = "postgres restart (immediate)"
	FaultPollError   = "poll error"
	FaultPollPanic   = "poll panic"
	FaultPollStall   = "poll stall past the heartbeat timeout"
	FaultDecodePanic = "message decoder panic"
	FaultCommitPanic = "OnCommit panic"
	FaultLockWait    = "OnCommit lock wait past statement_timeout"
	FaultPoison      = "poison message (does not decode)"
	armedPoll        = "armed: kill in a poll"
	armedCommit      = "armed: kill in the commit transaction"
	terminatedConns  = "connections terminated"
	externalRefused  = "external sends refused (task ended)"
	externalFailed   = "external sends failed (database errors)"
	victimsCancelled = "victims canceled"
)

type harness struct {
	cfg   Config
	pool  *pgxpool.Pool
	slots []*slot

	mu     sync.Mutex
	rng    *rand.Rand
	counts map[string]int

	stopping atomic.Bool // workers are being stopped for good: no restarts
	extSeq   atomic.Int64
	roots    atomic.Int64
	dbDown   sync.RWMutex // write-locked while PostgreSQL restarts
}

func (h *harness) count(what string, n int) {
	h.mu.Lock()
	h.counts[what] += n
	h.mu.Unlock()
}

func (h *harness) intn(n int) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rng.IntN(n)
}

func (h *harness) float() float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rng.Float64()
}

// Run runs the workload under faults for cfg.Duration, lets every task end,
// stops the workers and checks the ledger. It returns the figures, and an
// error if the run could not be carried out; broken guarantees are in
// Report.Violations.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if cfg.Command == nil || cfg.URL == "" || cfg.Dir == "" {
		return nil, errors.New("faults: Config needs URL, Dir and Command")
	}
	h := &harness{
		cfg:    cfg,
		rng:    rand.New(rand.NewPCG(cfg.Seed, 1)),
		counts: map[string]int{},
	}
	pool, err := pgxpool.New(ctx, cfg.URL)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	h.pool = pool
	if err := CreateLedger(ctx, pool); err != nil {
		return nil, err
	}
	// The limits sampler, from before the first claim until the workers
	// have stopped.
	if err := SetLimits(ctx, pool, cfg.NodeMaxRunning, cfg.TreeKeyLimit); err != nil {
		return nil, err
	}
	sampleCtx, stopSampler := context.WithCancel(ctx)
	sampled := make(chan struct{})
	limits := &Limits{NodeMaxRunning: cfg.NodeMaxRunning, TreeKeyLimit: cfg.TreeKeyLimit}
	go func() { defer close(sampled); h.sampleLimits(sampleCtx, limits) }()
	defer func() { stopSampler(); <-sampled }()
	began := time.Now()

	// Workers.
	var supervisors sync.WaitGroup
	for i := range cfg.Workers {
		s := &slot{h: h, name: fmt.Sprintf("w%d", i+1), index: i}
		h.slots = append(h.slots, s)
		supervisors.Add(1)
		go func() { defer supervisors.Done(); s.supervise() }()
	}
	defer func() {
		// On an early return, leave no process behind.
		h.stopping.Store(true)
		for _, s := range h.slots {
			s.signal(syscall.SIGCONT)
			s.signal(syscall.SIGKILL)
		}
		supervisors.Wait()
	}()

	// Load and faults, for cfg.Duration.
	cfg.Logf("faults: seed %d, %d workers, faults for %s", cfg.Seed, cfg.Workers, cfg.Duration)
	runCtx, stopRun := context.WithTimeout(ctx, cfg.Duration)
	var loops sync.WaitGroup
	goLoop := func(f func(context.Context)) {
		loops.Add(1)
		go func() { defer loops.Done(); f(runCtx) }()
	}
	goLoop(h.createRoots)
	goLoop(h.sendExternal)
	goLoop(h.cancelVictims)
	var freezes sync.WaitGroup
	goLoop(func(ctx context.Context) { h.injectFaults(ctx, &freezes) })
	<-runCtx.Done()
	stopRun()
	loops.Wait()
	freezes.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	faultTime := time.Since(began)

	// Drain: no more faults; disarm the kills, let every task end.
	cfg.Logf("faults: faults stopped after %s; draining", faultTime.Round(time.Second))
	for _, s := range h.slots {
		s.signal(syscall.SIGCONT)
		s.signal(syscall.SIGHUP)
	}
	drainStart := time.Now()
	if err := h.drain(ctx); err != nil {
		cfg.Logf("faults: drain: %v", err)
	}
	drainTime := time.Since(drainStart)

	// Stop the workers gracefully: each must exit 0.
	h.stopping.Store(true)
	for _, s := range h.slots {
		s.signal(syscall.SIGCONT)
		s.signal(syscall.SIGTERM)
	}
	stopped := make(chan struct{})
	go func() { supervisors.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(time.Minute):
		h.count("workers that did not stop on SIGTERM", 1)
		for _, s := range h.slots {
			s.signal(syscall.SIGKILL)
		}
		<-stopped
	}
	stopSampler()
	<-sampled

	if cfg.Citus {
		if err := undistribute(ctx, pool); err != nil {
			return nil, err
		}
	}
	ledger, err := Check(ctx, pool)
	if err != nil {
		return nil, err
	}
	logs, err := ScanLogs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	r := &Report{
		Seed: cfg.Seed, Workers: cfg.Workers, FaultTime: faultTime, DrainTime: drainTime,
		Ledger: ledger, Logs: logs, Harness: h.counts, Roots: int(h.roots.Load()),
		RestartsEnabled: cfg.Restart != nil, Limits: limits,
	}
	return r, nil
}

// drain cancels the victims left and waits for every task to end.
func (h *harness) drain(ctx context.Context) error {
	deadline := time.Now().Add(h.cfg.DrainTimeout)
	for {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		h.cancelLiveVictims(c, 1000, 0)
		var live int
		err := h.pool.QueryRow(c, `SELECT count(*) FROM corotask.tasks WHERE done_at IS NULL`).Scan(&live)
		cancel()
		if err == nil && live == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d tasks still live after %s (last error: %v)", live, h.cfg.DrainTimeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// createRoots keeps cfg.Roots root tasks alive.
func (h *harness) createRoots(ctx context.Context) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		h.dbDown.RLock()
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		var live int
		err := h.pool.QueryRow(c, `SELECT count(*) FROM corotask.tasks WHERE task_type = $1 AND done_at IS NULL`, string(TypeRoot)).Scan(&live)
		if err == nil && live < h.cfg.Roots {
			specs := make([]tasks.Spec, h.cfg.Roots-live)
			for i := range specs {
				specs[i] = tasks.Spec{Type: TypeRoot, State: NodeState{}}
			}
			// A create whose reply was lost may or may not have happened: the
			// ledger does not care, a root is only counted once it exists.
			if _, err := tasks.CreateMany(c, h.pool, specs); err == nil {
				h.roots.Add(int64(len(specs)))
			}
		}
		cancel()
		h.dbDown.RUnlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// sendExternal sends messages from outside any task to random live roots
// and nodes, each with its ledger row in the same transaction.
func (h *harness) sendExternal(ctx context.Context) {
	var targets []tasks.ID
	var fetched time.Time
	h.everyWhileUp(ctx, h.cfg.ExternalEvery, func(c context.Context) {
		if time.Since(fetched) > 500*time.Millisecond || len(targets) == 0 {
			rows, err := h.pool.Query(c, `SELECT task_id FROM corotask.tasks
				WHERE done_at IS NULL AND task_type IN ($1, $2) ORDER BY random() LIMIT 50`, string(TypeRoot), string(TypeNode))
			if err == nil {
				targets, err = pgx.CollectRows(rows, pgx.RowTo[tasks.ID])
			}
			if err == nil {
				fetched = time.Now()
			}
		}
		if len(targets) > 0 {
			to := targets[h.intn(len(targets))]
			id := fmt.Sprintf("ext-%d", h.extSeq.Add(1))
			kind, body := KindExt, any(Msg{ID: id, Kind: KindExt})
			switch r := h.float(); {
			case r < h.cfg.PoisonRate:
				kind, body = KindPoison, poisonBody(id)
			case r < h.cfg.PoisonRate+h.cfg.TrapRate:
				body = Msg{ID: id, Kind: KindExt, Trap: trapDecodePanic}
			}
			err := pgx.BeginFunc(c, h.pool, func(tx pgx.Tx) error {
				if err := inbox.Send(c, tx, to, tasks.ID{}, body); err != nil {
					return err
				}
				_, err := tx.Exec(c, `INSERT INTO faults.sent (msg_id, to_task, kind) VALUES ($1, $2, $3)`, id, to, kind)
				return err
			})
			if err == nil && kind == KindPoison {
				h.count(FaultPoison, 1)
			}
			switch {
			case errors.Is(err, tasks.ErrEnded):
				h.count(externalRefused, 1)
			case err != nil:
				// Maybe sent, maybe not: the message and its ledger row share
				// one transaction, so the ledger agrees either way.
				h.count(externalFailed, 1)
			}
		}
	})
}

// cancelVictims cancels victims that have lived a while.
func (h *harness) cancelVictims(ctx context.Context) {
	h.everyWhileUp(ctx, 300*time.Millisecond, func(c context.Context) {
		h.cancelLiveVictims(c, 3, time.Second)
	})
}

// everyWhileUp calls f every period until ctx ends, each call under the
// read lock of dbDown (not while the database is being restarted) and
// bounded by 5 seconds.
func (h *harness) everyWhileUp(ctx context.Context, period time.Duration, f func(c context.Context)) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		h.dbDown.RLock()
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		f(c)
		cancel()
		h.dbDown.RUnlock()
	}
}

func (h *harness) cancelLiveVictims(ctx context.Context, limit int, age time.Duration) {
	rows, err := h.pool.Query(ctx, `SELECT task_id FROM corotask.tasks
		WHERE task_type = $1 AND done_at IS NULL AND created_at < now() - make_interval(secs => $2)
		ORDER BY random() LIMIT $3`, string(TypeVictim), age.Seconds(), limit)
	if err != nil {
		return
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[tasks.ID])
	if err != nil {
		return
	}
	for _, id := range ids {
		if err := tasks.Cancel(ctx, h.pool, id); err == nil {
			h.count(victimsCancelled, 1)
		}
	}
}

// injectFaults injects one fault every FaultEvery on average.
func (h *harness) injectFaults(ctx context.Context, freezes *sync.WaitGroup) {
	lastRestart := time.Now()
	crash := false
	for {
		wait := time.Duration(h.float() * 2 * float64(h.cfg.FaultEvery))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if h.cfg.Restart != nil && time.Since(lastRestart) >= h.cfg.RestartEvery {
			h.restart(ctx, crash)
			crash = !crash
			lastRestart = time.Now()
			continue
		}
		s := h.slots[h.intn(len(h.slots))]
		switch r := h.intn(10); {
		case r < 3:
			if s.signal(syscall.SIGKILL) {
				h.count(FaultKill, 1)
			}
		case r < 5:
			if s.signal(syscall.SIGUSR1) {
				h.count(armedPoll, 1)
			}
		case r < 7:
			if s.signal(syscall.SIGUSR2) {
				h.count(armedCommit, 1)
			}
		case r < 8:
			if s.freezing.CompareAndSwap(false, true) {
				d := time.Duration((1.5 + 1.5*h.float()) * float64(h.cfg.HeartbeatTimeout))
				freezes.Add(1)
				go func() {
					defer freezes.Done()
					defer s.freezing.Store(false)
					if !s.signal(syscall.SIGSTOP) {
						return
					}
					h.count(FaultFreeze, 1)
					time.Sleep(d)
					s.signal(syscall.SIGCONT)
				}()
			}
		default:
			h.dbDown.RLock()
			c, cancel := context.WithTimeout(ctx, 5*time.Second)
			var n int
			err := h.pool.QueryRow(c, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE datname = current_database() AND application_name LIKE $1 AND random() < 0.7`, AppNamePrefix+"%").Scan(&n)
			cancel()
			h.dbDown.RUnlock()
			if err == nil {
				h.count(FaultTerminate, 1)
				h.count(terminatedConns, n)
			}
		}
	}
}

// restart restarts PostgreSQL while the harness's own writers wait.
func (h *harness) restart(ctx context.Context, crash bool) {
	h.dbDown.Lock()
	defer h.dbDown.Unlock()
	began := time.Now()
	// A restart begun as the run ends goes on to its end: cut short, it
	// would leave the server down (or count as a failed restart) while the
	// harness drains.
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if err := h.cfg.Restart(c, crash); err != nil {
		// The server must come back for the run to go on; on a loaded
		// machine pg_ctl has been seen to fail once. A second, clean restart
		// is a failure of the harness only if it fails too.
		h.cfg.Logf("faults: restart postgres: %v; trying again", err)
		h.count("postgres restarts tried again", 1)
		if err := h.cfg.Restart(c, false); err != nil {
			h.cfg.Logf("faults: restart postgres again: %v", err)
			h.count("postgres restarts that failed", 1)
			return
		}
		crash = false // what happened last was a clean restart
	}
	if crash {
		h.count(FaultCrash, 1)
	} else {
		h.count(FaultRestart, 1)
	}
	h.cfg.Logf("faults: postgres restarted (immediate=%v) in %s", crash, time.Since(began).Round(time.Millisecond))
}

// slot is one worker process, restarted whenever it dies until the run ends.
type slot struct {
	h        *harness
	name     string
	index    int
	freezing atomic.Bool

	mu  sync.Mutex
	cmd *exec.Cmd
	// ready is whether cmd has set its signal handlers (see
	// WorkerConfig.ReadyFD).
	ready bool
}

// signal sends sig to the slot's current process; false if there is none.
// Signals a worker handles itself (SIGUSR1, SIGUSR2, SIGHUP) are sent only
// to a worker that has said its handlers are set.
func (s *slot) signal(sig syscall.Signal) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return false
	}
	if (sig == syscall.SIGUSR1 || sig == syscall.SIGUSR2 || sig == syscall.SIGHUP) && !s.ready {
		return false
	}
	return s.cmd.Process.Signal(sig) == nil
}

// awaitReady marks cmd ready once it writes its byte on r (or never, if it
// dies first), and closes r.
func (s *slot) awaitReady(cmd *exec.Cmd, r *os.File) {
	defer r.Close()
	var b [1]byte
	if n, _ := r.Read(b[:]); n == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == cmd {
		s.ready = true
	}
}

func (s *slot) supervise() {
	h := s.h
	logPath := filepath.Join(h.cfg.Dir, s.name+".log")
	for gen := 0; ; gen++ {
		if h.stopping.Load() {
			return
		}
		wc := WorkerConfig{
			URL: h.cfg.URL, Name: s.name, Seed: h.cfg.Seed + uint64(1000*s.index+gen),
			AttemptLog:  filepath.Join(h.cfg.Dir, s.name+".attempts"),
			Concurrency: h.cfg.Concurrency, HeartbeatTimeout: h.cfg.HeartbeatTimeout,
			PollInterval: 200 * time.Millisecond,
			ErrorRate:    h.cfg.ErrorRate, PanicRate: h.cfg.PanicRate, StallRate: h.cfg.StallRate,
			OnCommitPanicRate: h.cfg.OnCommitPanicRate, LockWaitRate: h.cfg.LockWaitRate,
			Stall:         h.cfg.HeartbeatTimeout * 3 / 2,
			DisableListen: h.cfg.DisableListen,
			PriorityRate:  h.cfg.PriorityRate,
		}
		wc.ReadyFD = 3 // the first of cmd.ExtraFiles
		cmd, err := h.cfg.Command(wc)
		var readyR, readyW *os.File
		if err == nil {
			readyR, readyW, err = os.Pipe()
		}
		if err == nil {
			var f *os.File
			if f, err = os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
				cmd.Stdout, cmd.Stderr = f, f
				cmd.ExtraFiles = []*os.File{readyW}
				s.mu.Lock()
				err = cmd.Start()
				if err == nil {
					s.cmd, s.ready = cmd, false
				}
				s.mu.Unlock()
				_ = readyW.Close() // the worker's copy stays open
				if err == nil {
					go s.awaitReady(cmd, readyR)
					err = cmd.Wait()
					s.mu.Lock()
					s.cmd, s.ready = nil, false
					s.mu.Unlock()
				} else {
					_ = readyR.Close()
				}
				f.Close()
			} else {
				_, _ = readyR.Close(), readyW.Close()
			}
		}
		var exitErr *exec.ExitError
		switch {
		case err == nil && h.stopping.Load():
			h.count("worker exits: clean, at the end", 1)
		case errors.As(err, &exitErr) && h.stopping.Load() && exitErr.Sys().(syscall.WaitStatus).Signal() == syscall.SIGTERM:
			// Started so late that SIGTERM came before its handler: it had
			// nothing in flight.
			h.count("worker exits: clean, at the end", 1)
		case errors.As(err, &exitErr) && exitErr.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL:
			h.count("worker exits: SIGKILL", 1)
		default:
			h.count(UnexpectedExits, 1)
			h.cfg.Logf("faults: worker %s exited unexpectedly: %v (log %s)", s.name, err, logPath)
		}
		if h.stopping.Load() {
			return
		}
		time.Sleep(time.Duration(100+h.intn(500)) * time.Millisecond)
	}
}

// UnexpectedExits counts worker processes that exited on their own: a crash.
const UnexpectedExits = "worker exits: unexpected"
