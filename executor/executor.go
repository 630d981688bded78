package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/heartbeat"
	"github.com/corotask/corotask/internal/cause"
	"github.com/corotask/corotask/internal/dberr"
	corosql "github.com/corotask/corotask/sql"
	"github.com/corotask/corotask/tasks"
)

// The causes of a poll's context being canceled (context.Cause(ctx)), all
// defined here. After any of them the poll's outcome is not committed.
var (
	// ErrClaimLost: the claim no longer matches the database: the task was
	// canceled, released, or claimed by another executor after this one's
	// claim expired.
	ErrClaimLost = cause.ClaimLost
	// ErrRenewTimeout: the claim could not be renewed (database errors, or a
	// renewal that did not finish in time) before it expired; by then another
	// executor may own the task, so the poll must stop.
	ErrRenewTimeout = cause.RenewTimeout
	// ErrCanceled: the task was canceled (tasks.Cancel).
	ErrCanceled = cause.Canceled
	// ErrShutdown: the executor stopped before the poll finished (after
	// Config.ShutdownTimeout). Its claim is released, not counted as a failure.
	ErrShutdown = cause.Shutdown
)

// Executor claims ready tasks of the types registered with it, polls them
// and commits their outcomes. Create one with New, register pollers with
// Register, then call Run. Any number of executors, in any number of
// processes, may work on one database.
type Executor struct {
	id     tasks.ID // see ID
	pool   *pgxpool.Pool
	cfg    Config
	log    *slog.Logger
	keeper *heartbeat.Keeper
	// severedRetries bounds atOnce. Evaluated on first use: tests make
	// executors on pools that were never opened.
	severedRetries func() int
	wake           chan struct{} // a claim is worth trying: a NOTIFY, or a slot freed
	// listening is closed once LISTEN is in place, so that the first claim
	// misses no notification.
	listening  chan struct{}
	listenOnce sync.Once
	// commitQ feeds the batch committers; committing is canceled when they
	// stop, so that polls then commit on their own.
	commitQ    chan *pendingCommit
	committing context.Context
	// commitTurn is held by the batch committing (see slowCommit).
	commitTurn chan struct{}

	mu       sync.Mutex
	handlers map[tasks.Type]handler
	running  bool
	// inflight holds every claim this executor works on: polls running and
	// polls whose outcome is being committed (settling).
	inflight map[tasks.ID]*flight
	polling  int                // polls running, counted against Concurrency
	perType  map[tasks.Type]int // polls running per type, against MaxConcurrency
	// waiting holds claimed tasks that found no slot (see start), in claim
	// order, and waitingPerType counts them by type; they are in inflight,
	// and their claims are renewed.
	waiting        []*flight
	waitingPerType map[tasks.Type]int
	// lastStaleCheck is when a claim last looked for stale claims.
	lastStaleCheck time.Time
	// floors is where claims start their searches (see readyFloors); the
	// claim loop alone uses it.
	floors readyFloors
	// reserved counts slots held for children a batch's commit creates
	// claimed (see eager.go); they are counted in polling and perType too.
	reserved int
	// pollBase is the parent of the polls' contexts while Run runs; stopping
	// is set once Run claims no more, and no poll may start after it.
	pollBase context.Context
	stopping bool
	polls    sync.WaitGroup
	hooks    hookCaller
	schema   schemaGuard
	canceled canceledPolls
}

type flight struct {
	c        *claimed
	h        handler
	ctx      context.Context // the poll's (as the hooks returned it, once it started)
	cancel   context.CancelCauseFunc
	settling bool // the poll returned; its outcome is being committed
}

// New returns an Executor that works on pool, configured by cfg (see Config
// for the defaults and limits). It returns an error that names the field and
// the rule when cfg is outside its limits, and when pool is nil. The pool must
// allow at least two connections: one for LISTEN (unless disabled) and one for
// claims and commits; a pool about as large as the number of polls that commit
// at once is best. Heartbeats use a connection of their own, opened like the
// pool's but outside it.
func New(pool *pgxpool.Pool, cfg Config) (*Executor, error) {
	if pool == nil {
		return nil, errors.New("executor: New needs a pool (it was nil)")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return newExecutor(pool, cfg), nil
}

// MustNew is New for a configuration known to be valid (a literal in a
// program or a test): it panics where New returns an error.
func MustNew(pool *pgxpool.Pool, cfg Config) *Executor {
	e, err := New(pool, cfg)
	if err != nil {
		panic(err)
	}
	return e
}

func newExecutor(pool *pgxpool.Pool, cfg Config) *Executor {
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	e := &Executor{
		id:             tasks.NewID(),
		pool:           pool,
		cfg:            cfg,
		severedRetries: sync.OnceValue(func() int { return int(pool.Config().MaxConns) + 1 }),
		log:            cfg.Logger,
		wake:           make(chan struct{}, 1),
		listening:      make(chan struct{}),
		commitQ:        make(chan *pendingCommit),
		commitTurn:     make(chan struct{}, 1),
		committing:     stopped,
		handlers:       map[tasks.Type]handler{},
		inflight:       map[tasks.ID]*flight{},
		perType:        map[tasks.Type]int{},
		waitingPerType: map[tasks.Type]int{},
		floors:         readyFloors{at: map[string]time.Time{}},
		hooks:          hookCaller{cfg.Hooks},
		schema:         newSchemaGuard(),
		canceled:       canceledPolls{log: cfg.Logger},
	}
	renewed := e.hooks.heartbeatHook()
	e.keeper = heartbeat.NewDedicated(e.keeperConnect(heartbeat.ConnectLike(pool)), heartbeat.Config{
		Timeout: cfg.HeartbeatTimeout, Interval: cfg.HeartbeatInterval, Logger: cfg.Logger,
		Renewed: func(ctx context.Context, claims int, took time.Duration, err error) {
			e.schemaFault(err)
			if renewed != nil {
				renewed(ctx, claims, took, err)
			}
		},
	})
	return e
}

func (e *Executor) register(typ tasks.Type, h handler) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running {
		return fmt.Errorf("register %s: executor is already running", typ)
	}
	if _, ok := e.handlers[typ]; ok {
		return fmt.Errorf("register %s: %w", typ, ErrDuplicateType)
	}
	e.handlers[typ] = h
	return nil
}

// Types returns the registered task types.
func (e *Executor) Types() []tasks.Type {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]tasks.Type, 0, len(e.handlers))
	for t := range e.handlers {
		out = append(out, t)
	}
	return out
}

// Run claims and polls tasks until ctx ends, then stops gracefully: it claims
// no more, lets in-flight polls finish for up to Config.ShutdownTimeout, then
// cancels those left (with cause ErrShutdown) and releases their claims so
// another executor can take the tasks at once. Transient database errors
// (lost connections, a restarting server) are logged and retried; Run returns
// an error when it cannot start, and when the database's schema does not fit
// this build.
//
// Run checks the schema first (see sql.CheckSchema): on a database that has
// no corotask schema, or one older or newer than this build runs on, it
// claims nothing and returns the *sql.SchemaError, which says what was found,
// what is needed and what to do. It checks again when the heartbeat's
// connection is opened again and after failed claims; and a statement of
// corotask's own that fails with an error of class 42 (an undefined function,
// table or column, a permission denied) is never counted against the task:
// its claim is given back, and Run stops gracefully and returns the error
// (the *sql.SchemaError when the schema no longer fits).
func (e *Executor) Run(ctx context.Context) error {
	if err := e.checkPooler(ctx); err != nil {
		return err
	}
	e.mu.Lock()
	if e.running {
		e.mu.Unlock()
		return errors.New("executor: Run called twice")
	}
	if len(e.handlers) == 0 {
		e.mu.Unlock()
		return errors.New("executor: no pollers registered")
	}
	if err := checkQueryExecMode(e.pool); err != nil {
		e.mu.Unlock()
		return err
	}
	e.running = true
	e.mu.Unlock()
	if err := e.startChecked(ctx); err != nil {
		e.mu.Lock()
		e.running = false
		e.mu.Unlock()
		var se *corosql.SchemaError
		if ctx.Err() != nil && !errors.As(err, &se) {
			return nil // stopped before it started: nothing claimed
		}
		return err
	}
	e.log.Info("corotask: executor starting", "types", len(e.handlers), "concurrency", e.cfg.Concurrency)
	if e.cfg.HeartbeatInterval > e.cfg.HeartbeatTimeout/2 {
		e.log.Warn("corotask: HeartbeatInterval is over half of HeartbeatTimeout: one failed renewal expires every claim",
			"heartbeat_interval", e.cfg.HeartbeatInterval, "heartbeat_timeout", e.cfg.HeartbeatTimeout)
	}

	// Registered before the first claim, so that the tasks it serves are
	// not reported unserved; a failure is retried at the next refresh.
	if err := e.seen(ctx); err != nil {
		e.log.Warn("corotask: register this executor", "error", err)
	}

	// Polls and background loops outlive ctx: they are stopped by the
	// shutdown sequence below, not by ctx itself. A poll's context is
	// canceled through its own cancel function (see cancelPolls), so its
	// parent is not cancelable: a cancelable one would keep every poll's
	// context in a map under one lock, for nothing.
	pollBase := context.WithoutCancel(ctx)
	e.mu.Lock()
	e.pollBase, e.stopping = pollBase, false
	e.mu.Unlock()
	bg, stopBg := context.WithCancel(context.WithoutCancel(ctx))
	var loops sync.WaitGroup
	goLoop := func(f func(context.Context)) {
		loops.Add(1)
		go func() { defer loops.Done(); f(bg) }()
	}
	goLoop(func(ctx context.Context) { _ = e.keeper.Run(ctx) })
	goLoop(e.announce)
	committing, stopCommitting := context.WithCancel(bg)
	e.mu.Lock()
	e.committing = committing
	e.mu.Unlock()
	for range committers {
		goLoop(func(context.Context) { e.commitLoop(committing) })
	}
	if !e.cfg.DisableListen {
		goLoop(e.listen)
	}
	if e.cfg.Retention > 0 {
		goLoop(e.retain)
	}
	if !e.cfg.DisableVacuum {
		goLoop(e.vacuum)
	}

	if !e.cfg.DisableListen {
		// Claim only once notifications will be heard (or after a while
		// regardless: the fallback poll covers a LISTEN that cannot connect).
		t := time.NewTimer(5 * e.cfg.PollInterval)
		select {
		case <-e.listening:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	stopErr := e.claimLoop(ctx, pollBase)
	e.mu.Lock()
	e.stopping = true
	e.mu.Unlock()
	e.releaseWaiting()

	e.log.Info("corotask: executor stopping", "in_flight", e.inflightCount())
	if !waitTimeout(&e.polls, e.cfg.ShutdownTimeout) {
		e.cancelPolls(ErrShutdown)
		if !waitTimeout(&e.polls, e.cfg.ShutdownTimeout) {
			// Pollers that ignore their context: give their claims back anyway;
			// whatever they commit later is refused by the fence.
			e.giveBack(e.inflightClaims(), 0)
		}
	}
	stopCommitting()
	stopBg()
	loops.Wait()
	e.deregister()
	e.canceled.flush()
	e.mu.Lock()
	e.running = false
	e.mu.Unlock()
	e.log.Info("corotask: executor stopped")
	return stopErr
}

// startChecked checks the schema as Run starts, after any fault an earlier
// Run or PollOnce left. A database that cannot be reached yet (restarting,
// failing over, behind a pooler whose logins fail) is waited for, as the
// claim loop waits for it later: a process started during an outage is not
// an error. A schema that does not fit, or any other answer, is returned.
func (e *Executor) startChecked(ctx context.Context) error {
	select {
	case <-e.schema.faults:
	default:
	}
	e.schema.faulted.Store(false)
	for attempt := 1; ; attempt++ {
		err := e.checkSchema(ctx, e.pool)
		if err == nil || ctx.Err() != nil || !dberr.Unreachable(err) {
			return err
		}
		d := backoff(100*time.Millisecond, 5*time.Second, attempt)
		if attempt == 1 {
			e.log.Warn("corotask: cannot reach the database to check its schema; waiting for it", "error", err)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// checkQueryExecMode refuses pools whose queries do not learn their
// parameter types from the server: corotask passes arrays of IDs and of JSON,
// whose SQL types pgx cannot guess from their Go types.
func checkQueryExecMode(pool *pgxpool.Pool) error {
	name := map[pgx.QueryExecMode]string{pgx.QueryExecModeExec: "exec", pgx.QueryExecModeSimpleProtocol: "simple_protocol"}
	if m, ok := name[pool.Config().ConnConfig.DefaultQueryExecMode]; ok {
		return fmt.Errorf("executor: the pool's default_query_exec_mode %s is not supported; use cache_statement (the default), cache_describe or describe_exec", m)
	}
	return nil
}

// signal asks the claim loop to try a claim now.
func (e *Executor) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

func (e *Executor) inflightCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.inflight)
}

// claimLoop claims work whenever there are free slots and a reason to look:
// a NOTIFY, a finished poll, the next known wake_at, or PollInterval. It
// returns when ctx ends (nil), or after a schema fault (see schemaFault)
// with the error Run returns.
func (e *Executor) claimLoop(ctx context.Context, pollBase context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	failures, severed := 0, 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case fault := <-e.schema.faults:
			return e.schemaStop(ctx, fault)
		default:
		}
		wait := e.cfg.PollInterval
		if req := e.request(); req.total > 0 {
			var got []*claimed
			var next time.Time
			var err error
			if failures > 0 {
				// After failed claims (a lost connection, a restarted
				// server, a failover), the schema is checked again.
				err = e.checkSchema(ctx, e.pool)
				var se *corosql.SchemaError
				if errors.As(err, &se) {
					e.stopForSchema(err)
					continue
				}
			}
			if err == nil {
				got, next, err = e.claim(ctx, req)
			}
			if err == nil && ctx.Err() != nil {
				// Claimed as the stop began (a claim runs to its end, so that
				// none is left held unknown to this executor): given back.
				if len(got) > 0 {
					e.giveBack(got, 0)
				}
				return nil
			}
			if err == nil && e.schema.faulted.Load() {
				// Claimed as a fault stopped the executor: not polled.
				if len(got) > 0 {
					e.giveBack(got, 0)
				}
				continue
			}
			switch {
			case err != nil && ctx.Err() != nil:
				return nil
			case e.schemaFault(err):
				continue
			case e.atOnce(err, severed+1):
				// The pool's connection was gone (a killed backend, a
				// pooler's restart): another one most likely works.
				failures++
				severed++
				e.log.Warn("corotask: claim's connection was severed; retrying at once", "error", err)
				continue
			case err != nil:
				failures++
				wait = backoff(e.cfg.PollInterval/4, e.cfg.PollInterval*10, failures)
				e.log.Error("corotask: claim failed; retrying", "error", err, "retry_in", wait)
			default:
				failures, severed = 0, 0
				var dup []*claimed
				for _, c := range got {
					if !e.start(pollBase, c) {
						dup = append(dup, c)
					}
				}
				if len(dup) > 0 {
					// Not ready again before PollInterval: the old poll may
					// run on, and an immediate release would be claimed
					// (and given back) again at once, in a loop.
					e.giveBack(dup, e.cfg.PollInterval)
				}
				if len(got) == req.total {
					continue // there may be more ready right now
				}
				if !next.IsZero() {
					wait = min(wait, max(time.Until(next), time.Millisecond))
				}
			}
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case fault := <-e.schema.faults:
			return e.schemaStop(ctx, fault)
		case <-e.wake:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// start runs the poll of c in its own goroutine. It refuses (false) a task
// this executor is still polling: that poll's heartbeat went stale and the
// claim loop took the task again. The old poll's claim is superseded, so it
// is canceled; the new claim is given back rather than polled twice at once.
//
// A task it has no slot for waits for one, its claim renewed: the claim
// counted the free slots before it ran, and a batch's eager children (see
// eager.go) may have taken some meanwhile. Concurrency and MaxConcurrency
// hold, and no claim is given back for it.
func (e *Executor) start(pollBase context.Context, c *claimed) bool {
	e.mu.Lock()
	if old, ok := e.inflight[c.id]; ok && (!old.settling || c.takenOver) {
		e.mu.Unlock()
		e.log.Warn("corotask: took back a task whose heartbeat went stale while polled here", "task", c.id)
		old.cancel(ErrClaimLost)
		return false
	}
	// Else any earlier flight of the task has returned and its outcome is
	// written (the task was claimed without a takeover, so its claim was
	// gone): its goroutine is only forgetting it, and leaves this claim be.
	if e.polling >= e.cfg.Concurrency || e.typeFull(c.typ) {
		f := e.newFlight(pollBase, c)
		e.waiting = append(e.waiting, f)
		e.waitingPerType[c.typ]++
		// Renewed from now on; under e.mu, so that the flight cannot start,
		// end and be removed from the keeper before it is added.
		e.keeper.Add(heartbeat.Claim{Task: c.id, Token: c.claim}, c.claimedAt, f.cancel)
		e.mu.Unlock()
		return true
	}
	f := e.admit(pollBase, c)
	e.mu.Unlock()
	e.launch(f)
	return true
}

// typeFull reports whether typ's polls are at its MaxConcurrency. e.mu is
// held.
func (e *Executor) typeFull(typ tasks.Type) bool {
	limit := e.handlers[typ].options().concurrency
	return limit > 0 && e.perType[typ] >= limit
}

// takeWaiting takes the waiting tasks that now have a slot, in claim order,
// counting their polls as running, and those whose claim was lost or
// canceled while they waited (nothing of them was polled, so nothing is
// written). e.mu is held; startWaiting then starts or forgets them.
func (e *Executor) takeWaiting() (run, gone []*flight) {
	if len(e.waiting) == 0 || e.stopping || e.schema.faulted.Load() {
		return nil, nil
	}
	kept := e.waiting[:0]
	for _, f := range e.waiting {
		switch {
		case context.Cause(f.ctx) != nil:
			if e.inflight[f.c.id] == f {
				delete(e.inflight, f.c.id)
			}
			gone = append(gone, f)
		case e.polling < e.cfg.Concurrency && !e.typeFull(f.c.typ):
			e.polling++
			e.perType[f.c.typ]++
			run = append(run, f)
		default:
			kept = append(kept, f)
			continue
		}
		e.waitingPerType[f.c.typ]--
	}
	clear(e.waiting[len(kept):])
	e.waiting = kept
	return run, gone
}

// startWaiting starts the polls takeWaiting took, and forgets the others.
// It is called where a slot frees, from a goroutine counted in e.polls (a
// poll's, or a committer's while the batch's polls wait for it), so that
// adding to e.polls is safe while Run waits for the polls.
func (e *Executor) startWaiting(run, gone []*flight) {
	var back []*claimed
	for _, f := range gone {
		cause := context.Cause(f.ctx)
		if errors.Is(cause, ErrCanceled) {
			e.canceled.add(f.c.id)
		} else {
			e.log.Info("corotask: a claimed task that waited for a slot was lost meanwhile", "task", f.c.id,
				"type", f.c.typ, "cause", cause)
		}
		e.keeper.Remove(heartbeat.Claim{Task: f.c.id, Token: f.c.claim})
		if errors.Is(cause, ErrRenewTimeout) {
			// Perhaps still ours: given back (fenced) rather than left to
			// expire and be taken over, a failure counted.
			back = append(back, f.c)
		}
	}
	if len(back) > 0 {
		e.background(func() { e.giveBack(back, 0) })
	}
	for _, f := range run {
		e.polls.Add(1)
		go e.run(f)
	}
}

// background runs f in a goroutine Run waits for. It is called from a
// goroutine counted in e.polls (see startWaiting).
func (e *Executor) background(f func()) {
	e.polls.Add(1)
	go func() {
		defer e.polls.Done()
		f()
	}()
}

// releaseWaiting gives back the claims of the tasks still waiting for a
// slot: Run stops, and no poll starts after it.
func (e *Executor) releaseWaiting() {
	e.mu.Lock()
	fs := e.waiting
	e.waiting = nil
	clear(e.waitingPerType)
	for _, f := range fs {
		if e.inflight[f.c.id] == f {
			delete(e.inflight, f.c.id)
		}
	}
	e.mu.Unlock()
	if len(fs) == 0 {
		return
	}
	cs := make([]*claimed, len(fs))
	for i, f := range fs {
		e.keeper.Remove(heartbeat.Claim{Task: f.c.id, Token: f.c.claim})
		f.cancel(ErrShutdown)
		cs[i] = f.c
	}
	e.giveBack(cs, 0)
}

// newFlight counts c's claim in flight. e.mu is held.
func (e *Executor) newFlight(pollBase context.Context, c *claimed) *flight {
	pctx, cancel := context.WithCancelCause(pollBase)
	f := &flight{c: c, h: e.handlers[c.typ], ctx: pctx, cancel: cancel}
	e.inflight[c.id] = f
	return f
}

// admit counts c's poll in flight and running. e.mu is held.
func (e *Executor) admit(pollBase context.Context, c *claimed) *flight {
	f := e.newFlight(pollBase, c)
	e.polling++
	e.perType[c.typ]++
	return f
}

// launch has f's claim renewed and runs its poll in a goroutine of its own.
func (e *Executor) launch(f *flight) {
	e.keeper.Add(heartbeat.Claim{Task: f.c.id, Token: f.c.claim}, f.c.claimedAt, f.cancel)
	e.polls.Add(1)
	go e.run(f)
}

// run polls f's task and settles the outcome, in the poll's own goroutine.
// There is one such goroutine per poll in flight, and the frames of run and
// of the handler sit under the poller's own for as long as it waits. They
// are kept small (what comes before and after the poll is in functions of
// its own, which return before the poll or are called after it) so that a
// poller that waits on a channel or a timer fits in the 2 KB stack a
// goroutine starts with: a stack that grew is never shrunk back while the
// poll waits, and 10,000 polls in flight would hold twice the memory.
func (e *Executor) run(f *flight) {
	// Deferred, so that a poller that ends its goroutine (runtime.Goexit,
	// as t.FailNow does in a test) still frees its slot and stops renewing
	// its claim, which then expires and is taken over.
	defer e.forget(f)
	e.beginPoll(f)
	e.endPoll(f, f.h.poll(f.ctx, f.c))
}

// beginPoll sets the poll's context to the one the hooks return.
//
//go:noinline
func (e *Executor) beginPoll(f *flight) {
	f.ctx = e.hooks.pollStart(f.ctx, f.c)
}

// endPoll settles the outcome of f's poll.
//
//go:noinline
func (e *Executor) endPoll(f *flight, out *outcome) {
	e.hooks.pollReturned(f.c, out)
	e.polled(f.c)
	e.settle(f.ctx, f.c, out, f.h.options())
	e.hooks.pollDone(f.ctx, f.c)
}

// forget forgets f's poll once it has settled (or its goroutine ended):
// its claim is no longer renewed, its context is canceled, and the claim
// loop may fill its slot.
func (e *Executor) forget(f *flight) {
	e.done(f.c)
	f.cancel(nil)
	e.signal()
	e.polls.Done()
}

// giveBack releases claims this executor took but will not poll; their
// tasks are ready again after delay. A release that fails for the database's
// sake is tried again for up to 10 s (at once after a severed connection):
// a claim not given back waits for its expiry, and is then taken over as a
// failed attempt.
func (e *Executor) giveBack(cs []*claimed, delay time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for attempt := 1; ; attempt++ {
		err := e.release(ctx, delay, cs...)
		if err == nil {
			return
		}
		if !transient(err) || ctx.Err() != nil {
			e.log.Error("corotask: release claims", "claims", len(cs), "error", err)
			return
		}
		if e.atOnce(err, attempt) {
			continue
		}
		t := time.NewTimer(backoff(50*time.Millisecond, time.Second, attempt))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
}

// polled frees the slot of a poll that returned, so that the claim loop can
// take more work while its outcome commits: commits are batched, and a slot
// held until the commit would leave the executor idle while every batch
// waits on its WAL flush.
func (e *Executor) polled(c *claimed) {
	e.mu.Lock()
	if f, ok := e.inflight[c.id]; ok && f.c == c {
		e.freeSlot(f)
	}
	run, gone := e.takeWaiting()
	e.mu.Unlock()
	e.startWaiting(run, gone)
	e.signal()
}

// freeSlot stops counting f's poll as running, once. e.mu is held.
func (e *Executor) freeSlot(f *flight) {
	if !f.settling {
		f.settling = true
		e.polling--
		e.perType[f.c.typ]--
	}
}

// done forgets a claim whose poll has settled.
func (e *Executor) done(c *claimed) {
	e.keeper.Remove(heartbeat.Claim{Task: c.id, Token: c.claim})
	e.mu.Lock()
	if f, ok := e.inflight[c.id]; ok && f.c == c {
		delete(e.inflight, c.id)
		e.freeSlot(f)
	}
	run, gone := e.takeWaiting()
	e.mu.Unlock()
	e.startWaiting(run, gone)
}

// cancelTask cancels the poll of a task canceled in the database.
func (e *Executor) cancelTask(id tasks.ID) {
	e.mu.Lock()
	f, ok := e.inflight[id]
	e.mu.Unlock()
	if ok {
		// Logged with the others the cancel stopped, once the poll settles.
		e.log.Debug("corotask: task canceled while polled", "task", id)
		f.cancel(ErrCanceled)
	}
}

// cancelPolls cancels the context of every poll in flight with cause. The
// claim loop has stopped: no poll starts after it.
func (e *Executor) cancelPolls(cause error) {
	for _, f := range e.flights() {
		f.cancel(cause)
	}
}

// inflightClaims returns the claims of every poll still in flight.
func (e *Executor) inflightClaims() []*claimed {
	fs := e.flights()
	cs := make([]*claimed, len(fs))
	for i, f := range fs {
		cs[i] = f.c
	}
	return cs
}

// flights returns every poll in flight, as they are now.
func (e *Executor) flights() []*flight {
	e.mu.Lock()
	defer e.mu.Unlock()
	fs := make([]*flight, 0, len(e.inflight))
	for _, f := range e.inflight {
		fs = append(fs, f)
	}
	return fs
}

func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}
